// One list+watch of one kind in one namespace (or all), restarted after every failure.
//
// Failure modes of @kubernetes/client-node 2.0's ListWatch that this handles:
// - any list or watch error (apiserver down, connection reset, 403, 5xx) emits `error` and the
//   ListWatch stops for good: we restart it with capped exponential backoff;
// - a silently dead connection: 2.0 ends a watch after 30 s without data and re-watches (1.4 had no
//   client timeout at all), but a list or a re-watch can still hang on one; so the server is asked
//   to end each watch after `timeoutSeconds` (the ListWatch then re-watches from its last
//   resourceVersion; a 410 Gone makes it re-list), and a watchdog restarts a source that has shown
//   no sign of life well past that;
// - a re-list only reports objects that changed: a restart after failures is reported (`onRelisted`),
//   so that the informer looks again at every cached model.
import { KubeConfig, KubernetesObjectApi, ListWatch, Watch, type KubernetesObject } from '@kubernetes/client-node';
import { apiClient } from '../process/kube-api.js';
import type { ShardScope } from '../sharding/shard-scope.js';
import type { WatchedObject, WatchEventType } from './event-filter.js';
import { withoutManagedFields, type SourceSpec } from './watched-kinds.js';

export interface SourceTiming {
  /** Seconds after which the server ends each watch (bounds how long a dead connection goes unnoticed). */
  watchTimeoutSeconds: number;
  restartBackoffMs: { initial: number; max: number };
}

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
export class Source {
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
    private readonly opts: SourceTiming,
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
