// The thin informer: lists and watches MachineModels and the operator's own children, and turns
// relevant events into signal requests. It never reconciles.
//
// Failure modes of @kubernetes/client-node 2.0's ListWatch that this handles:
// - any list or watch error (apiserver down, connection reset, 403, 5xx) emits `error` and the
//   ListWatch stops for good: we restart it with capped exponential backoff;
// - a silently dead connection: 2.0 ends a watch after 30 s without data and re-watches (1.4 had no
//   client timeout at all), but a list or a re-watch can still hang on one; so the server is asked
//   to end each watch after `timeoutSeconds` (the ListWatch then re-watches from its last
//   resourceVersion; a 410 Gone makes it re-list), and a watchdog restarts a source that has shown
//   no sign of life well past that;
// - a re-list only reports objects that changed: after a restart every cached MachineModel is
//   signalled again, so a change missed while disconnected is still looked at.
import {
  KubeConfig,
  KubernetesObjectApi,
  ListWatch,
  Watch,
  type CoreV1Event,
  type KubernetesObject,
  type V1ContainerStatus,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { childSelector, group, labels, plural, version } from '../core/api.js';
import { apiClient } from '../process/kube-api.js';
import { apiMessage } from '../process/kube-errors.js';
import type { Reachability } from '../process/ready-gate.js';
import {
  ChangeFilter,
  type SignalRequest,
  type WatchedKind,
  type WatchedObject,
  type WatchEventType,
} from './event-filter.js';
import { StartGate } from './start-gate.js';
import { DeletionLane } from './deletion-lane.js';
import { startGateDefaults } from '../core/first-round.js';
import { deletionUnderWay } from '../core/namespace-deletion.js';
import { ShardScope, type Shards } from '../sharding/shard-scope.js';

interface SourceSpec {
  kind: WatchedKind | 'Namespace' | 'Event';
  apiVersion: string;
  /** URL path segment of the collection, e.g. apis/apps/v1 + deployments. */
  prefix: string;
  resource: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Strips in place what the operator never reads, before the object is cached. */
  keep?: (obj: KubernetesObject) => void;
}

/**
 * Who applied which field, kilobytes per object: the operator never reads it (its writes are
 * server-side applies of the whole desired state), so no cache keeps it.
 */
function withoutManagedFields(obj: KubernetesObject): void {
  if (obj.metadata) delete obj.metadata.managedFields;
}

/**
 * A model's Pods are many and large (their managed fields alone are kilobytes); the operator reads
 * only whether the scheduler placed them (src/core/pod-scheduling.ts) and how their containers fare
 * (src/core/container-troubles.ts), so the cache keeps just that.
 */
function keepHealthView(obj: KubernetesObject): void {
  const pod = obj as V1Pod;
  const { name, namespace, uid, resourceVersion, labels, deletionTimestamp } = pod.metadata ?? {};
  pod.metadata = { name, namespace, uid, resourceVersion, labels, deletionTimestamp };
  const health = (statuses: V1ContainerStatus[] | undefined) =>
    statuses?.map(({ name, image, ready, restartCount, state, lastState }) => ({
      name,
      image,
      // Required by the type; container-troubles.ts never reads it.
      imageID: '',
      ready,
      restartCount,
      state,
      lastState,
    }));
  const init = health(pod.status?.initContainerStatuses);
  pod.status = {
    conditions: pod.status?.conditions?.filter((c) => c.type === 'PodScheduled'),
    containerStatuses: health(pod.status?.containerStatuses),
    // A pod template may have init containers of its own: how they fare is the model's health too.
    ...(init ? { initContainerStatuses: init } : {}),
  };
  const containers = pod.spec?.containers.map(({ name, image, resources }) => ({
    name,
    image,
    resources: { limits: resources?.limits },
  }));
  pod.spec = containers ? { containers } : undefined;
}

const sources: SourceSpec[] = [
  { kind: 'MachineModel', apiVersion: `${group}/${version}`, prefix: `/apis/${group}/${version}`, resource: plural },
  {
    kind: 'Deployment',
    apiVersion: 'apps/v1',
    prefix: '/apis/apps/v1',
    resource: 'deployments',
    labelSelector: childSelector,
  },
  { kind: 'Service', apiVersion: 'v1', prefix: '/api/v1', resource: 'services', labelSelector: childSelector },
  {
    kind: 'HorizontalPodAutoscaler',
    apiVersion: 'autoscaling/v2',
    prefix: '/apis/autoscaling/v2',
    resource: 'horizontalpodautoscalers',
    labelSelector: childSelector,
  },
];

/**
 * The models' Pods. A Pod no node can place changes no Deployment status: watched, it wakes its
 * model at once, so readiness needs no polling (and no listing: its scheduling is read from here).
 * Optional, as an operator whose role predates it may not watch Pods: then readiness lists them,
 * and an unschedulable Pod is noticed at the next readiness recheck or Deployment change.
 */
const podSource: SourceSpec = {
  kind: 'Pod',
  apiVersion: 'v1',
  prefix: '/api/v1',
  resource: 'pods',
  labelSelector: childSelector,
  keep: keepHealthView,
};

/**
 * Namespaces, to know which are being deleted: there every child goes with its model, and the
 * children's changes (pods going, so Deployments losing availability) wake no round. Optional: without
 * the permission to watch them, children wake their models as before.
 */
const namespaceSource: SourceSpec = { kind: 'Namespace', apiVersion: 'v1', prefix: '/api/v1', resource: 'namespaces' };

/**
 * The kubelet's readiness probe failures (`Unhealthy` Events about Pods): a failing probe changes
 * nothing in the Pod, so without them a model would quote its probe only at a readiness recheck.
 * Optional, like the Pod watch. The cache keeps what the filter reads.
 */
const probeEventSource: SourceSpec = {
  kind: 'Event',
  apiVersion: 'v1',
  prefix: '/api/v1',
  resource: 'events',
  fieldSelector: 'involvedObject.kind=Pod,reason=Unhealthy',
  keep: (obj) => {
    const event = obj as CoreV1Event;
    const { name, namespace, uid, resourceVersion } = event.metadata;
    event.metadata = { name, namespace, uid, resourceVersion };
    event.involvedObject = { kind: event.involvedObject.kind, name: event.involvedObject.name };
    for (const key of ['source', 'reportingComponent', 'reportingInstance', 'firstTimestamp', 'eventTime'] as const)
      delete event[key];
  },
};

/**
 * The kubelet's FailedMount Events about Pods: a volume the model cache cannot mount yet (fetching,
 * refused by the store, the cache full) changes nothing in the Pod either. Optional, like the probes'.
 */
const mountEventSource: SourceSpec = {
  ...probeEventSource,
  fieldSelector: 'involvedObject.kind=Pod,reason=FailedMount',
};

const httpRoutes: SourceSpec = {
  kind: 'HTTPRoute',
  apiVersion: 'gateway.networking.k8s.io/v1',
  prefix: '/apis/gateway.networking.k8s.io/v1',
  resource: 'httproutes',
  labelSelector: childSelector,
};

export interface InformerOptions {
  /** Namespaces to watch; empty for all. */
  namespaces: string[];
  /** Also watch our HTTPRoutes (with the gateway-api driver), so a deleted or edited route is repaired at once. */
  watchHttpRoutes: boolean;
  /** Seconds after which the server ends each watch (bounds how long a dead connection goes unnoticed). */
  watchTimeoutSeconds: number;
  restartBackoffMs: { initial: number; max: number };
  /** Told whether the apiserver answers until every source has listed once (then each restart is logged). */
  apiserver?: Reachability;
  /** How many new models' workflows start at once (src/informer/start-gate.ts); 0: no bound. */
  maxStartingModels: number;
  /**
   * Whether the deletions of models whose namespace is being deleted wait for the namespaces'
   * deletion (deletion-lane.ts): only without a gateway, where no route outside a namespace can be left.
   */
  holdDeletions: boolean;
  /** Only the namespaces of these shards (src/core/shards.ts); absent: every namespace. See `reshard`. */
  shards?: Shards;
}

export const defaultInformerOptions: InformerOptions = {
  namespaces: [],
  watchHttpRoutes: false,
  watchTimeoutSeconds: 300,
  restartBackoffMs: { initial: 500, max: 30_000 },
  maxStartingModels: startGateDefaults.maxStarting,
  holdDeletions: false,
};

/** A watch that asks for the scope's shards and passes on only the objects the scope keeps. */
class ScopedWatch extends Watch {
  constructor(
    kc: KubeConfig,
    private readonly selector: string,
    private readonly keeps: (obj: KubernetesObject) => boolean,
  ) {
    super(kc);
  }

  override watch(
    path: string,
    params: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: KubernetesObject, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    const query = this.selector ? { ...params, shardSelector: this.selector } : params;
    return super.watch(
      path,
      query,
      (phase, obj, watchObj) => {
        if (phase === 'BOOKMARK' || phase === 'ERROR' || this.keeps(obj)) callback(phase, obj, watchObj);
      },
      done,
    );
  }
}

/** One list+watch of one kind in one namespace (or all), restarted after every failure. */
class Source {
  readonly lw: ListWatch<KubernetesObject>;
  private failures = 0;
  /** Restarts after failures, for the metrics. */
  restarts = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private failedSinceStart = false;
  hasSynced = false;
  /** Last sign of life: a (re)connect or any event. A healthy watch reconnects every timeoutSeconds. */
  private lastActivity = Date.now();
  private watchdog: NodeJS.Timeout | undefined;
  /** Resolves after the first successful list. */
  readonly synced: Promise<void>;
  private markSynced!: () => void;
  /** Resolves after the first successful list or when stopped, whichever comes first. */
  readonly settled: Promise<void>;
  private markSettled!: () => void;

  constructor(
    readonly spec: SourceSpec,
    readonly namespace: string | undefined,
    kc: KubeConfig,
    scope: ShardScope,
    private readonly opts: InformerOptions,
    private readonly onEvent: (kind: SourceSpec['kind'], type: WatchEventType, obj: WatchedObject) => void,
    private readonly onRelisted: (source: Source) => void,
    private readonly onFailed: (source: Source, err: unknown, retryInMs: number) => void,
  ) {
    // A cluster-scoped Namespace has no namespace to hash: the apiserver cannot shard its watch.
    const namespaced = spec.kind !== 'Namespace';
    const keeps = (o: KubernetesObject) => scope.keeps((namespaced ? o.metadata?.namespace : o.metadata?.name) ?? '');
    const selector = namespaced ? scope.selector : '';
    const api = apiClient(kc, KubernetesObjectApi, { query: selector ? { shardSelector: selector } : {} });
    const collection = `${spec.prefix}${namespace ? `/namespaces/${namespace}` : ''}/${spec.resource}`;
    const watchPath = `${collection}?timeoutSeconds=${opts.watchTimeoutSeconds}&allowWatchBookmarks=true`;
    const { labelSelector, fieldSelector } = spec;
    // The ListWatch caches the very object it hands to its first listener: `keep` trims the cached copy.
    const keep = spec.keep ?? withoutManagedFields;
    const list = async () => {
      const listed = await api.list(
        spec.apiVersion,
        spec.kind,
        namespace,
        undefined,
        undefined,
        undefined,
        fieldSelector,
        labelSelector,
      );
      listed.items = listed.items.filter(keeps);
      // A list's items come without apiVersion and kind. Cached so, they would read as different from
      // what the operator applies, and every round after a restart would apply its children again.
      for (const item of listed.items) {
        Object.assign(item, { apiVersion: spec.apiVersion, kind: spec.kind });
        keep(item);
      }
      return listed;
    };
    this.lw = new ListWatch(watchPath, new ScopedWatch(kc, selector, keeps), list, false, labelSelector, fieldSelector);
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    this.settled = new Promise((resolve) => (this.markSettled = resolve));
    void this.synced.then(() => this.markSettled());
    const alive = () => (this.lastActivity = Date.now());
    this.lw.on('connect', alive);
    // A source stopped in the middle of a list (a reshard) still gets that list's objects from the
    // ListWatch, and a watch after it: they are no longer this replica's.
    const event = (type: WatchEventType, o: KubernetesObject) => {
      if (this.stopped) return;
      alive();
      if (type !== 'deleted') keep(o);
      this.onEvent(spec.kind, type, o as WatchedObject);
    };
    this.lw.on('add', (o) => event('added', o));
    this.lw.on('update', (o) => event('updated', o));
    this.lw.on('delete', (o) => event('deleted', o));
    this.lw.on('error', (err) => this.failed(err));
  }

  /** Silence longer than this means the connection is dead, not the collection quiet. */
  private get silenceLimitMs(): number {
    return (this.opts.watchTimeoutSeconds + Math.max(5, this.opts.watchTimeoutSeconds / 5)) * 1000;
  }

  private checkAlive(): void {
    if (this.stopped || this.restartTimer || Date.now() - this.lastActivity < this.silenceLimitMs) return;
    const silentSeconds = Math.round((Date.now() - this.lastActivity) / 1000);
    void this.lw.stop();
    this.failed(
      new Error(
        `no word from the watch for ${silentSeconds}s although the server ends each after ${this.opts.watchTimeoutSeconds}s: connection presumed dead`,
      ),
    );
  }

  /** Its cache can be read: listed, and not restarting after a failure. */
  get usable(): boolean {
    return this.hasSynced && !this.restartTimer && !this.stopped;
  }

  get label(): string {
    return `${this.spec.kind}${this.namespace ? ` in ${this.namespace}` : ''}`;
  }

  async start(): Promise<void> {
    this.failedSinceStart = false;
    this.lastActivity = Date.now();
    this.watchdog ??= setInterval(() => this.checkAlive(), Math.min(this.silenceLimitMs / 4, 15_000));
    await this.lw.start();
    // Stopped while it listed: the ListWatch went on to watch; stop that watch too.
    if (this.stopped) return void (await this.lw.stop());
    if (this.failedSinceStart) return;
    const wasFailing = this.failures > 0;
    this.failures = 0;
    this.hasSynced = true;
    this.markSynced();
    if (wasFailing) this.onRelisted(this);
  }

  private failed(err: unknown): void {
    this.failedSinceStart = true;
    // One restart at a time: an aborted watch reports its own error after the watchdog already did.
    if (this.stopped || this.restartTimer) return;
    const delay = Math.min(this.opts.restartBackoffMs.initial * 2 ** this.failures, this.opts.restartBackoffMs.max);
    this.failures++;
    this.restarts++;
    this.onFailed(this, err, delay);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.start();
    }, delay);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.markSettled();
    clearTimeout(this.restartTimer);
    clearInterval(this.watchdog);
    await this.lw.stop();
  }
}

/** The sources of one scope: rebuilt when the replica's shards change. */
interface Watching {
  scope: ShardScope;
  sources: Source[];
  /** Watched when permitted; the operator works without them (a missing permission is logged at each retry). */
  pods: Source[];
  probeEvents: Source[];
  /** The sources whose caches the worker reads: every one but the namespaces'. */
  cached: Source[];
  namespaces: Source;
}

export class Informer {
  private readonly filter = new ChangeFilter();
  private watching: Watching;
  private readonly apiserver?: Reachability;
  private readonly options: InformerOptions;
  /** Restarts of the sources a reshard replaced. */
  private earlierRestarts = 0;
  /** Reshards run one after another. */
  private resharding: Promise<void> = Promise.resolve();
  private started = false;
  readonly startGate: StartGate;
  /** Deletions of models whose namespace is being deleted, told once no such deletion is under way. */
  readonly deletions: DeletionLane;
  events = 0;
  /** Children's events dropped because their namespace is being deleted. */
  ignoredInTerminatingNamespaces = 0;

  constructor(
    private readonly kc: KubeConfig,
    onSignal: (request: SignalRequest) => void,
    private readonly log: Logger,
    opts: Partial<InformerOptions> = {},
  ) {
    const o = { ...defaultInformerOptions, ...opts };
    this.options = o;
    this.startGate = new StartGate(onSignal, { ...startGateDefaults, maxStarting: o.maxStartingModels });
    this.deletions = new DeletionLane(
      (request) => this.startGate.offer(request),
      () => this.modelsNamespaceDeleting(),
    );
    this.apiserver = o.apiserver;
    this.watching = this.watch(new ShardScope(o.shards));
  }

  private watch(scope: ShardScope): Watching {
    const o = this.options;
    const listed = o.namespaces.filter((ns) => scope.keeps(ns));
    const namespaces: (string | undefined)[] = scope.empty ? [] : o.namespaces.length ? listed : [undefined];
    const source = (spec: SourceSpec, ns: string | undefined) =>
      new Source(
        spec,
        ns,
        this.kc,
        scope,
        o,
        (k, t, obj) => {
          if (k === 'Event') this.handleProbe(t, obj as CoreV1Event);
          else if (k === 'Namespace') {
            if (t === 'deleted') this.deletions.look();
          } else this.handle(k, t, obj);
        },
        (s) => this.relisted(s),
        (s, err, retryInMs) => this.failed(s, err, retryInMs),
      );
    const main = [...sources, ...(o.watchHttpRoutes ? [httpRoutes] : [])].flatMap((spec) =>
      namespaces.map((ns) => source(spec, ns)),
    );
    const pods = namespaces.map((ns) => source(podSource, ns));
    return {
      scope,
      sources: main,
      pods,
      probeEvents: [probeEventSource, mountEventSource].flatMap((spec) => namespaces.map((ns) => source(spec, ns))),
      cached: [...main, ...pods],
      namespaces: source(namespaceSource, undefined),
    };
  }

  private get sources(): Source[] {
    return this.watching.sources;
  }

  private get cached(): Source[] {
    return this.watching.cached;
  }

  private get namespaces(): Source {
    return this.watching.namespaces;
  }

  /** Whether the namespace is being deleted, as far as the namespace watch knows (false when it cannot). */
  private terminating(namespace: string | undefined): boolean {
    if (!namespace || !this.namespaces.usable) return false;
    return !!this.namespaces.lw.get(namespace)?.metadata?.deletionTimestamp;
  }

  /**
   * Whether a namespace this informer serves is being deleted and still making progress with its
   * models (src/core/namespace-deletion.ts); one kept terminating by a finalizer not ours does not
   * count for long. An unserved namespace has no model cached or held. When the namespace watch
   * cannot say, nothing holds them back.
   */
  private modelsNamespaceDeleting(): boolean {
    if (!this.namespaces.usable) return false;
    return this.namespaces.lw.list().some((ns) => {
      const name = ns.metadata?.name ?? '';
      if (!ns.metadata?.deletionTimestamp) return false;
      const models = this.list('MachineModel', name);
      return deletionUnderWay({
        modelFinalizers: models === 'unknown' ? 'unknown' : models.map((m) => m.metadata?.finalizers ?? []),
        sinceLastHeldMs: this.deletions.sinceLastHeld(name),
      });
    });
  }

  /** Objects in the caches, by kind: with shards, only the shards' namespaces'. */
  get cachedObjects(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const s of this.cached) counts.set(s.spec.kind, (counts.get(s.spec.kind) ?? 0) + s.lw.list().length);
    return counts;
  }

  get restarts(): number {
    return this.earlierRestarts + this.cached.reduce((n, s) => n + s.restarts, 0);
  }

  /**
   * The watched object of `kind` as the cache holds it (undefined when it does not); 'unknown' when
   * no usable watch covers that kind and namespace. The worker's reads go here first
   * (activities/kube-client.ts); callers must not change what they get.
   */
  lookup(kind: string, namespace: string, name: string): KubernetesObject | undefined | 'unknown' {
    const source = this.usableSource(kind, namespace);
    if (!source) return 'unknown';
    return source.lw.get(name, namespace);
  }

  private usableSource(kind: string, namespace: string): Source | undefined {
    // Another replica's shard: this cache knows nothing of it, which is not "absent".
    if (!this.watching.scope.keeps(namespace)) return undefined;
    const source = this.cached.find((s) => s.spec.kind === kind && (!s.namespace || s.namespace === namespace));
    return source?.usable ? source : undefined;
  }

  /** Every watched object of `kind` in the namespace, as the cache holds them; 'unknown' as for `lookup`. */
  list(kind: string, namespace: string): readonly KubernetesObject[] | 'unknown' {
    const source = this.usableSource(kind, namespace);
    if (!source) return 'unknown';
    return source.lw.list(namespace);
  }

  private handle(kind: WatchedKind, type: 'added' | 'updated' | 'deleted', obj: WatchedObject): void {
    this.events++;
    if (kind === 'MachineModel') this.startGate.observe(type, obj);
    const request = this.filter.observe(kind, type, obj);
    if (!request) return;
    if (this.terminating(request.namespace)) {
      if (request.signal === 'deleted' && this.options.holdDeletions) return this.deletions.hold(request);
      if (kind !== 'MachineModel') {
        this.ignoredInTerminatingNamespaces++;
        return;
      }
    }
    // The echo of a round's own write is signalled too (but for a child's creation, see the filter):
    // the workflow knows what its rounds wrote, whichever replica ran them, and drops it
    // (workflows/machine-model.ts).
    this.startGate.offer(request);
  }

  /**
   * A model's deletion that a look at the running workflows found (workflow-sweep.ts): held by the
   * deletion lane, as a watched one is, while its namespace is being deleted.
   */
  tellDeleted(request: SignalRequest): void {
    if (this.options.holdDeletions && this.terminating(request.namespace)) return this.deletions.hold(request);
    this.startGate.offer(request);
  }

  /** A probe failure wakes the model whose Pod it names, found in the Pod cache (no cache: nobody). */
  private handleProbe(type: WatchEventType, event: CoreV1Event): void {
    this.events++;
    const namespace = event.metadata.namespace ?? '';
    const pod = this.lookup('Pod', namespace, event.involvedObject.name ?? '');
    const name = pod && pod !== 'unknown' ? pod.metadata?.labels?.[labels.instance] : undefined;
    const request = this.filter.observeProbe(type, event, name ? { namespace, name } : undefined);
    if (request && !this.terminating(namespace)) this.startGate.offer(request);
  }

  private failed(source: Source, err: unknown, retryInMs: number): void {
    // Before the first list of every source, the apiserver not answering is one line, not one per source.
    if (this.apiserver && !this.started) return this.apiserver.down(apiMessage(err));
    this.log.warn({ source: source.label, err: apiMessage(err), retryInMs }, 'list/watch failed; restarting');
  }

  /** After a reconnect, look again at every model this source knows of. */
  private relisted(source: Source): void {
    this.log.info({ source: source.label }, 'watch re-established');
    const kind = source.spec.kind;
    // A relisted Pod or probe Event that changed went through the filter already; the others have nothing to say.
    if (kind === 'Namespace' || kind === 'Pod' || kind === 'Event') return;
    const requests = new Map<string, SignalRequest>();
    for (const obj of source.lw.list() as WatchedObject[]) {
      const request = this.filter.lookAgain(kind, obj);
      if (request) requests.set(`${request.namespace}/${request.name}`, request);
    }
    for (const request of requests.values()) this.startGate.offer(request);
  }

  /** Starts every list+watch; resolves when each has listed once (failures keep retrying in the background). */
  async start(): Promise<void> {
    await this.startWatching(this.watching);
    this.started = true;
    this.apiserver?.up();
  }

  private async startWatching(w: Watching): Promise<void> {
    // Not awaited: the operator works without them (a missing permission is logged at each retry).
    void w.namespaces.start();
    for (const s of [...w.pods, ...w.probeEvents]) void s.start();
    await Promise.all(w.sources.map((s) => s.start()));
    await Promise.all(w.sources.map((s) => s.synced));
  }

  /** Resolves once the sources of the current scope have listed (after a reshard: the new ones). */
  async listed(): Promise<void> {
    for (;;) {
      await this.resharding;
      const current = this.watching;
      await Promise.all(current.sources.map((s) => s.settled));
      // Replaced meanwhile: wait for the newer sources instead.
      if (current === this.watching) return;
    }
  }

  /**
   * Whether lists and watches carry the shards' selector: only where the apiserver was seen to apply
   * it (src/sharding/shard-scope.ts, apiserverFiltersShards). Set before the first reshard.
   */
  serverSelector = true;

  private async stopWatching(w: Watching): Promise<void> {
    await Promise.all([...w.cached, ...w.probeEvents, w.namespaces].map((s) => s.stop()));
  }

  /**
   * Keeps only the namespaces of these shards from now on. The sources are replaced: those of the old
   * scope stop, the new ones start listing (meanwhile every lookup is 'unknown', so the worker reads
   * the apiserver), and a gained shard's models are signalled as at start-up, since the filter has not
   * seen them. What the filter, the start gate and the deletion lane remember of a lost shard is
   * dropped: its new owner signals its models.
   */
  reshard(owned: readonly number[]): Promise<void> {
    const shards = this.options.shards;
    if (!shards) throw new Error('reshard: this informer was not started with shards');
    const next = this.resharding.then(async () => {
      const scope = new ShardScope({ ...shards, owned }, this.serverSelector);
      if (scope.sameAs(this.watching.scope)) return;
      const before = this.watching;
      this.earlierRestarts += before.cached.reduce((n, s) => n + s.restarts, 0);
      await this.stopWatching(before);
      this.filter.forget((ns) => !scope.keeps(ns));
      this.startGate.forget((ns) => !scope.keeps(ns));
      this.deletions.forget((ns) => !scope.keeps(ns));
      this.watching = this.watch(scope);
      // Not awaited: lookups answer 'unknown' (the worker reads the apiserver) until each source has
      // listed, and a list that cannot finish (the apiserver away) holds up no other placement.
      if (this.started) void this.startWatching(this.watching);
    });
    this.resharding = next.catch(() => undefined);
    return next;
  }

  async stop(): Promise<void> {
    this.startGate.stop();
    this.deletions.stop();
    await this.resharding;
    await this.stopWatching(this.watching);
  }
}
