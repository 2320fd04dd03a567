import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { apiClient } from '../src/process/kube-api.js';
import { activityCancellation } from './cancellation.js';
import { apiStatus } from '../src/process/kube-errors.js';
import { fieldManager, group, plural, version, type MachineModel, type MachineModelStatus } from '../src/core/api.js';
import { selectorLabels, selectorString } from '../src/core/desired-state.js';
import { compareResourceVersions, newerThan } from '../src/core/resource-version.js';

/** The informer's caches, as the activities read them. */
export interface WatchCache {
  /**
   * The cached object, or undefined when the cache does not hold it; 'unknown' when the cache cannot
   * say (the kind or namespace is not watched, or its watch has not listed or is restarting).
   */
  lookup(kind: string, namespace: string, name: string): KubernetesObject | undefined | 'unknown';
  /** Every cached object of `kind` in the namespace; 'unknown' as for `lookup`. */
  list(kind: string, namespace: string): readonly KubernetesObject[] | 'unknown';
}

/** Objects remembered per map below; beyond this many the oldest are forgotten. */
const maxRemembered = 50_000;

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > maxRemembered) map.delete(map.keys().next().value!);
}

/**
 * The Kubernetes calls the activities make, in one place. Reads are served from the informer's cache
 * when one is attached (as controller-runtime's client reads from its informers): a cache miss asks
 * the apiserver, since a child's watch only sees objects with the operator's labels, and so does an
 * object whose cached copy is older than this process's own last write to it (read your writes).
 */
export class KubeClient {
  readonly objects: KubernetesObjectApi;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  private cache: WatchCache | undefined;
  /** "Kind/namespace/name" → the resourceVersion the cache must reach before it serves that object. */
  private readonly freshFrom = new Map<string, string>();
  /** Reads served from the cache and from the apiserver, for the metrics. */
  readonly reads = { cache: 0, apiserver: 0 };

  constructor(readonly config: KubeConfig) {
    // Objects always carry their namespace here, so the kubeconfig's default namespace is not needed.
    const options = { callerSignal: activityCancellation };
    this.objects = apiClient(config, KubernetesObjectApi, options);
    this.custom = apiClient(config, CustomObjectsApi, options);
    this.core = apiClient(config, CoreV1Api, options);
  }

  /** From now on, reads try the informer's cache first. */
  readFrom(cache: WatchCache): void {
    this.cache = cache;
  }

  /** A copy of the cached object when the cache holds it and has seen our own last write to it. */
  private cached<T>(kind: string, namespace: string, name: string): T | undefined {
    const hit = this.cache?.lookup(kind, namespace, name);
    if (!hit || hit === 'unknown') return undefined;
    const key = `${kind}/${namespace}/${name}`;
    const floor = this.freshFrom.get(key);
    if (floor !== undefined) {
      const order = compareResourceVersions(hit.metadata?.resourceVersion, floor);
      if (order === undefined || order < 0) return undefined;
      this.freshFrom.delete(key);
    }
    this.reads.cache++;
    return structuredClone(hit) as T;
  }

  /** Our write made `resourceVersion`: the cache serves the object again once it has seen that. */
  private wrote(kind: string, namespace: string | undefined, name: string | undefined, resourceVersion?: string) {
    if (!this.cache || !namespace || !name || !resourceVersion) return;
    const key = `${kind}/${namespace}/${name}`;
    remember(this.freshFrom, key, resourceVersion);
  }

  /**
   * The object changed after `seen` (a write failed its conflict check, or we deleted it): read it
   * from the apiserver until the cache has something newer or no longer holds it.
   */
  bypassCacheUntilNewer(kind: string, namespace: string, name: string, seen: string | undefined): void {
    const floor = newerThan(seen);
    if (this.cache && floor) remember(this.freshFrom, `${kind}/${namespace}/${name}`, floor);
  }

  async getModel(namespace: string, name: string): Promise<MachineModel | undefined> {
    const hit = this.cached<MachineModel>('MachineModel', namespace, name);
    if (hit) return hit;
    this.reads.apiserver++;
    try {
      return (await this.custom.getNamespacedCustomObject({ group, version, plural, namespace, name })) as MachineModel;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** A Namespace's annotations (a cluster administrator's settings for it); undefined when it is gone. */
  async namespaceAnnotations(name: string): Promise<Record<string, string> | undefined> {
    this.reads.apiserver++;
    try {
      return (await this.core.readNamespace({ name })).metadata?.annotations ?? {};
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
    const patched = (await this.custom.patchNamespacedCustomObject(
      { group, version, plural, namespace, name, body: ops },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    )) as MachineModel;
    this.wrote('MachineModel', namespace, name, patched.metadata?.resourceVersion);
    return patched;
  }

  async patchModelStatus(namespace: string, name: string, status: MachineModelStatus): Promise<void> {
    const patched = (await this.custom.patchNamespacedCustomObjectStatus(
      { group, version, plural, namespace, name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as MachineModel;
    this.wrote('MachineModel', namespace, name, patched.metadata?.resourceVersion);
  }

  /** A model's Pods: from the cache, which keeps only the fields scheduling needs, when it can. */
  async listPods(namespace: string, model: string): Promise<V1Pod[]> {
    const cached = this.cache?.list('Pod', namespace);
    if (cached && cached !== 'unknown') {
      this.reads.cache++;
      const labels = Object.entries(selectorLabels(model));
      return cached
        .filter((p) => labels.every(([k, v]) => p.metadata?.labels?.[k] === v))
        .map((p) => structuredClone(p) as V1Pod);
    }
    this.reads.apiserver++;
    return (await this.core.listNamespacedPod({ namespace, labelSelector: selectorString(model) })).items;
  }

  /** The kubelet's latest "Readiness probe failed: ..." for a Pod; best effort (undefined when none or not allowed). */
  lastProbeFailure(namespace: string, pod: string): Promise<string | undefined> {
    return this.latestPodEvent(namespace, pod, 'Unhealthy', (m) => m.startsWith('Readiness probe'));
  }

  /**
   * The kubelet's latest FailedMount message for a Pod, if it said it in the last 10 minutes (it says
   * it again at each try while the mount fails: an older one is a failure that passed); best effort.
   */
  lastMountFailure(namespace: string, pod: string): Promise<string | undefined> {
    return this.latestPodEvent(namespace, pod, 'FailedMount', () => true, Date.now() - 600_000);
  }

  private async latestPodEvent(
    namespace: string,
    pod: string,
    reason: string,
    wanted: (message: string) => boolean,
    since = 0,
  ): Promise<string | undefined> {
    try {
      this.reads.apiserver++;
      const events = await this.core.listNamespacedEvent({
        namespace,
        fieldSelector: `involvedObject.kind=Pod,involvedObject.name=${pod},reason=${reason}`,
      });
      const latest = events.items
        .filter((e) => wanted(e.message ?? '') && eventTime(e) >= since)
        .sort((a, b) => eventTime(b) - eventTime(a))[0];
      return latest?.message?.trim();
    } catch {
      return undefined;
    }
  }

  async read<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
  ): Promise<T | undefined> {
    const hit = this.cached<T>(kind, namespace, name);
    if (hit) return hit;
    this.reads.apiserver++;
    try {
      return (await this.objects.read({ apiVersion, kind, metadata: { name, namespace } })) as T;
    } catch (err) {
      if (apiStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /**
   * Like read, for an object that matters only if the operator made it, so that it carries the labels
   * the informer watches by: a watch that has listed and does not hold it answers without a request.
   */
  async readLabelled<T extends KubernetesObject>(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
  ): Promise<T | undefined> {
    if (this.cache && this.cache.lookup(kind, namespace, name) === undefined) {
      this.reads.cache++;
      return undefined;
    }
    return this.read<T>(apiVersion, kind, namespace, name);
  }

  /** Server-side apply as the operator's field manager, taking over fields others changed (drift). */
  async apply<T extends KubernetesObject>(obj: T): Promise<T> {
    const applied = (await this.objects.patch(
      obj,
      undefined,
      undefined,
      fieldManager,
      true,
      PatchStrategy.ServerSideApply,
    )) as T;
    this.wrote(obj.kind!, obj.metadata?.namespace, obj.metadata?.name, applied.metadata?.resourceVersion);
    return applied;
  }

  /** Deletes the object, only while it is that uid (and, with one, that resourceVersion): else 409. */
  async delete(obj: KubernetesObject, preconditionUid?: string, preconditionVersion?: string): Promise<void> {
    const preconditions = {
      ...(preconditionUid ? { uid: preconditionUid } : {}),
      ...(preconditionVersion ? { resourceVersion: preconditionVersion } : {}),
    };
    try {
      await this.objects.delete(
        obj,
        undefined,
        undefined,
        undefined,
        undefined,
        'Background',
        Object.keys(preconditions).length ? { preconditions } : undefined,
      );
    } catch (err) {
      const status = apiStatus(err);
      // A precondition not met: the cache's copy is behind, so the next read asks the apiserver.
      if (status === 409 && obj.kind && obj.metadata?.namespace && obj.metadata.name)
        this.bypassCacheUntilNewer(obj.kind, obj.metadata.namespace, obj.metadata.name, obj.metadata.resourceVersion);
      if (status !== 404) throw err;
    }
    // The cache may still hold it for a moment: until then, ask the apiserver.
    const { namespace, name } = obj.metadata ?? {};
    if (!obj.kind || !namespace || !name) return;
    const cached = this.cache?.lookup(obj.kind, namespace, name);
    const seen = cached && cached !== 'unknown' ? cached.metadata?.resourceVersion : undefined;
    this.bypassCacheUntilNewer(obj.kind, namespace, name, seen ?? obj.metadata?.resourceVersion);
  }
}

function eventTime(e: CoreV1Event): number {
  return new Date(e.lastTimestamp ?? e.eventTime ?? e.metadata?.creationTimestamp ?? 0).getTime();
}
