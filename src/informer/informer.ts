// The thin informer: lists and watches MachineModels and the operator's own children, and turns
// relevant events into signal requests. It never reconciles. Each list+watch restarts itself
// (source.ts); after a restart every cached MachineModel is signalled again, so a change missed while
// disconnected is still looked at.
import type { CoreV1Event, KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { labels } from '../core/api.js';
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
import { Source, type SourceTiming } from './source.js';
import {
  httpRoutes,
  mainSources,
  mountEventSource,
  namespaceSource,
  podSource,
  probeEventSource,
  type SourceSpec,
} from './watched-kinds.js';

export interface InformerOptions extends SourceTiming {
  /** Namespaces to watch; empty for all. */
  namespaces: string[];
  /** Also watch our HTTPRoutes (with the gateway-api driver), so a deleted or edited route is repaired at once. */
  watchHttpRoutes: boolean;
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
    const main = [...mainSources, ...(o.watchHttpRoutes ? [httpRoutes] : [])].flatMap((spec) =>
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
