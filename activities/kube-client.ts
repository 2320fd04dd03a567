import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { fieldManager, group, plural, version, type MachineModel, type MachineModelStatus } from '../src/api.js';

/** The Kubernetes calls the activities make, in one place. */
export class KubeClient {
  readonly objects: KubernetesObjectApi;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(readonly config: KubeConfig) {
    this.objects = KubernetesObjectApi.makeApiClient(config);
    this.custom = config.makeApiClient(CustomObjectsApi);
    this.core = config.makeApiClient(CoreV1Api);
  }

  async getModel(namespace: string, name: string): Promise<MachineModel | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as MachineModel;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** JSON patch on the MachineModel itself (finalizers); `test` operations make it conditional. */
  async jsonPatchModel(namespace: string, name: string, ops: object[]): Promise<MachineModel> {
    return (await this.custom.patchNamespacedCustomObject(
      { group, version, plural, namespace, name, body: ops },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    )) as MachineModel;
  }

  async patchModelStatus(namespace: string, name: string, status: MachineModelStatus): Promise<void> {
    await this.custom.patchNamespacedCustomObjectStatus(
      { group, version, plural, namespace, name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async read<T extends KubernetesObject>(apiVersion: string, kind: string, namespace: string, name: string): Promise<T | undefined> {
    try {
      return (await this.objects.read({ apiVersion, kind, metadata: { name, namespace } })) as T;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** Server-side apply as the operator's field manager, taking over fields others changed (drift). */
  async apply<T extends KubernetesObject>(obj: T): Promise<T> {
    return (await this.objects.patch(obj, undefined, undefined, fieldManager, true, PatchStrategy.ServerSideApply)) as T;
  }

  async delete(obj: KubernetesObject, preconditionUid?: string): Promise<void> {
    try {
      await this.objects.delete(obj, undefined, undefined, undefined, undefined, 'Background',
        preconditionUid ? { preconditions: { uid: preconditionUid } } : undefined);
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  }
}

/** The HTTP status of a failed API call, or undefined for network errors. */
export function apiStatus(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** The apiserver's own message (metav1.Status.message) rather than the client's dump of the response. */
export function apiMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = typeof err.body === 'string' ? safeParse(err.body) : err.body;
    const message = (body as { message?: unknown } | undefined)?.message;
    if (typeof message === 'string') return message;
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}
