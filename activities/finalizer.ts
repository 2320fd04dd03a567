import { finalizerName, type ModelRef } from '../src/core/api.js';
import type { ActivityDeps } from './deps.js';
import { fail, kubeFailure } from './failure.js';
import { apiStatus } from '../src/plumbing/kube-errors.js';

// Finalizer changes are JSON patches that first test the uid and resourceVersion: they never touch a
// newer object of the same name, and never overwrite a finalizer list someone else just changed
// (a conflict fails the attempt and the activity's retry reads again).

export function ensureFinalizerActivity({ kube }: ActivityDeps) {
  return async function ensureFinalizer(ref: ModelRef): Promise<{ added: boolean }> {
    return patchFinalizers(
      kube,
      ref,
      (list) => (list.includes(finalizerName) ? undefined : [...list, finalizerName]),
      'adding the finalizer',
    ).then((changed) => ({ added: changed }));
  };
}

export function removeFinalizerActivity({ kube }: ActivityDeps) {
  return async function removeFinalizer(ref: ModelRef): Promise<{ removed: boolean }> {
    return patchFinalizers(
      kube,
      ref,
      (list) => (list.includes(finalizerName) ? list.filter((f) => f !== finalizerName) : undefined),
      'removing the finalizer',
    ).then((changed) => ({ removed: changed }));
  };
}

async function patchFinalizers(
  kube: ActivityDeps['kube'],
  ref: ModelRef,
  change: (current: string[]) => string[] | undefined,
  action: string,
): Promise<boolean> {
  try {
    const obj = await kube.getModel(ref.namespace, ref.name);
    if (!obj || obj.metadata.uid !== ref.uid) return false;
    const next = change(obj.metadata.finalizers ?? []);
    if (!next) return false;
    await kube.jsonPatchModel(ref.namespace, ref.name, [
      { op: 'test', path: '/metadata/uid', value: ref.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: obj.metadata.resourceVersion },
      { op: 'add', path: '/metadata/finalizers', value: next },
    ]);
    return true;
  } catch (err) {
    // Gone while we worked on it: nothing left to change.
    if (apiStatus(err) === 404) return false;
    // A failed `test` (the object changed since we read it) comes back as 422 or 409: read again.
    if (apiStatus(err) === 422 || apiStatus(err) === 409) {
      throw fail('Conflict', `${action} on MachineModel ${ref.namespace}/${ref.name}: the object changed meanwhile`);
    }
    throw kubeFailure(err, `${action} on MachineModel ${ref.namespace}/${ref.name}`);
  }
}
