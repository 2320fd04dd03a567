import { finalizerName, type ModelRef } from '../src/core/api.js';
import type { ActivityDeps } from './deps.js';
import { fail, kubeFailure } from './failure.js';
import { apiStatus } from '../src/process/kube-errors.js';

// Finalizer changes are JSON patches that first test the uid and resourceVersion: they never touch a
// newer object of the same name, and never overwrite a finalizer list someone else just changed
// (a conflict fails the attempt and the activity's retry reads again, from the apiserver if the
// informer's cache has nothing newer than what was read).

export function ensureFinalizerActivity({ kube }: ActivityDeps) {
  /** `written`: "MachineModel/<resourceVersion>" after the patch, so the round knows its own echo. */
  return async function ensureFinalizer(ref: ModelRef): Promise<{ added: boolean; written?: string }> {
    const resourceVersion = await patchFinalizers(
      kube,
      ref,
      (list) => (list.includes(finalizerName) ? undefined : [...list, finalizerName]),
      'adding the finalizer',
    );
    return resourceVersion ? { added: true, written: `MachineModel/${resourceVersion}` } : { added: false };
  };
}

export function removeFinalizerActivity({ kube }: ActivityDeps) {
  return async function removeFinalizer(ref: ModelRef): Promise<{ removed: boolean }> {
    return patchFinalizers(
      kube,
      ref,
      (list) => (list.includes(finalizerName) ? list.filter((f) => f !== finalizerName) : undefined),
      'removing the finalizer',
    ).then((resourceVersion) => ({ removed: resourceVersion !== undefined }));
  };
}

/** The resourceVersion the patch produced; undefined when there was nothing to change. */
async function patchFinalizers(
  kube: ActivityDeps['kube'],
  ref: ModelRef,
  change: (current: string[]) => string[] | undefined,
  action: string,
): Promise<string | undefined> {
  let seen: string | undefined;
  try {
    const obj = await kube.getModel(ref.namespace, ref.name);
    seen = obj?.metadata.resourceVersion;
    if (!obj || obj.metadata.uid !== ref.uid) return undefined;
    const next = change(obj.metadata.finalizers ?? []);
    if (!next) return undefined;
    const patched = await kube.jsonPatchModel(ref.namespace, ref.name, [
      { op: 'test', path: '/metadata/uid', value: ref.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: obj.metadata.resourceVersion },
      { op: 'add', path: '/metadata/finalizers', value: next },
    ]);
    return patched.metadata?.resourceVersion ?? '';
  } catch (err) {
    // Gone while we worked on it: nothing left to change.
    if (apiStatus(err) === 404) return undefined;
    // A failed `test` (the object changed since we read it) comes back as 422 or 409: read again.
    if (apiStatus(err) === 422 || apiStatus(err) === 409) {
      kube.bypassCacheUntilNewer('MachineModel', ref.namespace, ref.name, seen);
      throw fail('Conflict', `${action} on MachineModel ${ref.namespace}/${ref.name}: the object changed meanwhile`);
    }
    throw kubeFailure(err, `${action} on MachineModel ${ref.namespace}/${ref.name}`);
  }
}
