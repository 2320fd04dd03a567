// Puts this replica's work where its shards are: one Temporal worker per shard held, polling that
// shard's task queue, and the informer watching those shards' namespaces. Changes are applied one at
// a time, in the order that keeps one worker per shard: lost shards' workers stop first (their
// in-flight tasks finish within the shutdown grace), then the informer takes the new scope, then the
// gained shards' workers start (their caches warm by replaying as tasks come).
import type { Logger } from 'pino';

export interface ShardWorker {
  /** Resolves when the worker has stopped, rejects when it failed by itself. */
  run: Promise<void>;
  shutdown(): Promise<void>;
}

export interface PlacementParts {
  /** Gives up (rejects) rather than wait long: the next placement tries again. */
  startWorker(shard: number): Promise<ShardWorker>;
  /** The informer's scope: only these shards' namespaces (its lists go on in the background). */
  reshard(owned: readonly number[]): Promise<void>;
  /**
   * After each change, with the shards now worked on: look for their models deleted while nobody
   * watched (a gained shard's, or a kept one's deleted while its watch was replaced).
   */
  placed(held: readonly number[], gained: readonly number[]): void;
  /** A worker failed by itself (not stopped here): the process cannot go on as it is. */
  failed(err: unknown): void;
}

export class ShardPlacement {
  private readonly workers = new Map<number, ShardWorker>();
  /** Workers of lost shards, stopping. */
  private readonly stopping = new Set<Promise<void>>();
  private chain: Promise<void> = Promise.resolve();
  private wanted: readonly number[] = [];
  /** The informer's scope as last set. */
  private scoped: readonly number[] = [];
  private queued = false;

  constructor(
    private readonly parts: PlacementParts,
    private readonly log: Logger,
  ) {}

  get held(): number[] {
    return [...this.workers.keys()].sort((a, b) => a - b);
  }

  /**
   * Resolves once this placement (or a later one) is applied. A lost shard's worker is told to stop
   * at once, not after the step under way (which may be starting others); the rest is applied in
   * steps, each with the latest set asked for, so a placement stuck behind a slow one is skipped.
   */
  place(owned: readonly number[]): Promise<void> {
    this.wanted = owned;
    for (const [k, worker] of this.workers) if (!owned.includes(k)) this.stop(k, worker);
    if (this.queued) return this.chain;
    this.queued = true;
    const next = this.chain.then(() => {
      this.queued = false;
      return this.apply();
    });
    this.chain = next.catch((err: unknown) => this.log.error({ err }, 'placing shards failed'));
    return this.chain;
  }

  private stop(k: number, worker: ShardWorker): void {
    this.workers.delete(k);
    const stopped = worker.shutdown();
    this.stopping.add(stopped);
    void stopped.finally(() => this.stopping.delete(stopped));
  }

  private async apply(): Promise<void> {
    const owned = [...this.wanted].sort((a, b) => a - b);
    await Promise.all(this.stopping);
    const lost = this.scoped.filter((k) => !owned.includes(k));
    const gained = owned.filter((k) => !this.workers.has(k));
    if (lost.length === 0 && gained.length === 0) return;
    const started: number[] = [];
    try {
      if (owned.join() !== this.scoped.join()) {
        await this.parts.reshard(owned);
        this.scoped = owned;
      }
      for (const k of gained) {
        if (!this.wanted.includes(k)) continue;
        const worker = await this.parts.startWorker(k);
        worker.run.catch((err: unknown) => {
          if (this.workers.get(k) === worker) this.parts.failed(err);
        });
        this.workers.set(k, worker);
        started.push(k);
        // Lost while it started: stopped at once.
        if (!this.wanted.includes(k)) this.stop(k, worker);
      }
      this.log.info({ shards: this.held, lost, gained: started }, 'shards placed');
    } finally {
      this.parts.placed(this.held, started);
    }
  }
}
