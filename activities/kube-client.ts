import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { apiClient } from '../src/plumbing/kube-api.js';
import { apiStatus } from '../src/plumbing/kube-errors.js';
import { fieldManager, group, plural, version, type MachineModel, type MachineModelStatus } from '../src/core/api.js';

/** The Kubernetes calls the activities make, in one place. */
export class KubeClient {
  readonly objects: KubernetesObjectApi;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(readonly config: KubeConfig) {
    // Objects always carry their namespace here, so the kubeconfig's default namespace is not needed.
    this.objects = apiClient(config, KubernetesObjectApi);
    this.custom = apiClient(config, CustomObjectsApi);
    this.core = apiClient(config, CoreV1Api);
  }

  async getModel(namespace: string, name: string): Promise<MachineModel | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as MachineModel;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  async listModels(): Promise<MachineModel[]> {
    const list = (await this.custom.listClusterCustomObject({ group, version, plural })) as { items: MachineModel[] };
    return list.items;
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

  async listPods(namespace: string, labelSelector: string): Promise<V1Pod[]> {
    return (await this.core.listNamespacedPod({ namespace, labelSelector })).items;
  }

  async read<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
  ): Promise<T | undefined> {
    try {
      return (await this.objects.read({ apiVersion, kind, metadata: { name, namespace } })) as T;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** Server-side apply as the operator's field manager, taking over fields others changed (drift). */
  async apply<T extends KubernetesObject>(obj: T): Promise<T> {
    return (await this.objects.patch(
      obj,
      undefined,
      undefined,
      fieldManager,
      true,
      PatchStrategy.ServerSideApply,
    )) as T;
  }

  async delete(obj: KubernetesObject, preconditionUid?: string): Promise<void> {
    try {
      await this.objects.delete(
        obj,
        undefined,
        undefined,
        undefined,
        undefined,
        'Background',
        preconditionUid ? { preconditions: { uid: preconditionUid } } : undefined,
      );
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  }
}
