// Workers for queues of the install that the current layout leaves unpolled (a shard past a lowered
// count, the shard queues of an install no longer sharded, a queue a forged move named), while
// workflows run there: a workflow of this replica's shards takes its move (moveToTaskQueue) on such
// a worker and continues as new on its own queue, and one whose model is gone finishes there. A
// rollout started on the queue finishes there too. Each drain stops once two checks in a row find
// nothing running on its queue.
import type { Logger } from 'pino';
import type { ShardWorker } from './shard-placement.js';

export interface DrainParts {
  /** Gives up (rejects) rather than wait long: the next look tries again. */
  startWorker(queue: string): Promise<ShardWorker>;
  /** How many workflows, of any type, still run on the queue. */
  running(queue: string): Promise<number>;
}

export class QueueDrains {
  /** Each queue's drain, from the moment its start is asked for (so two looks start one worker). */
  private readonly drains = new Map<string, Promise<ShardWorker | undefined>>();
  /** Starts and stops under way, which stop() waits for: each worker holds the shared connection. */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Queues whose last check counted nothing running: a drain stops at its second such check. */
  private readonly emptyOnce = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly parts: DrainParts,
    private readonly log: Logger,
    private readonly checkEveryMs = 30_000,
  ) {}

  get queues(): string[] {
    return [...this.drains.keys()].sort();
  }

  /** Drains these queues until nothing runs on them (those already drained go on). */
  async drain(queues: readonly string[]): Promise<void> {
    const starts = queues.filter((q) => !this.stopped && !this.drains.has(q)).map((q) => this.start(q));
    if (starts.length > 0 && !this.timer) {
      this.timer = setInterval(() => void this.check(), this.checkEveryMs);
      this.timer.unref();
    }
    await Promise.all(starts);
  }

  private start(queue: string): Promise<ShardWorker | undefined> {
    const started = this.track(
      this.parts.startWorker(queue).then(
        async (worker) => {
          if (this.stopped) {
            await worker.shutdown();
            return undefined;
          }
          this.log.info({ taskQueue: queue }, 'draining a queue no shard of this layout polls');
          // A drain that fails by itself is only a drain: the next look starts another.
          worker.run.catch((err: unknown) => {
            this.log.warn({ err, taskQueue: queue }, 'a queue drain failed');
            if (this.drains.get(queue) === started) this.drains.delete(queue);
          });
          return worker;
        },
        (err: unknown) => {
          this.log.warn({ err, taskQueue: queue }, 'could not start a queue drain; the next look tries again');
          if (this.drains.get(queue) === started) this.drains.delete(queue);
          return undefined;
        },
      ),
    );
    this.drains.set(queue, started);
    return started;
  }

  /** Stops each drain whose queue has nothing running any more. */
  async check(): Promise<void> {
    for (const [queue, drain] of [...this.drains]) {
      const worker = await drain;
      if (!worker) continue;
      const left = await this.parts.running(queue).catch(() => undefined);
      if (left !== 0 || this.drains.get(queue) !== drain || this.stopped) {
        this.emptyOnce.delete(queue);
        continue;
      }
      // Visibility may lag a run just continued as new on this queue: nothing twice in a row.
      if (!this.emptyOnce.has(queue)) {
        this.emptyOnce.add(queue);
        continue;
      }
      this.emptyOnce.delete(queue);
      this.drains.delete(queue);
      await this.track(worker.shutdown());
      this.log.info({ taskQueue: queue }, 'a drained queue has nothing running; its worker stopped');
    }
    if (this.drains.size === 0) this.stopTimer();
  }

  /** Stops every drain, and waits for those starting or stopping: the connection closes after. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopTimer();
    const drains = [...this.drains.values()];
    this.drains.clear();
    const workers = await Promise.all(drains);
    await Promise.all(workers.map((w) => w?.shutdown()));
    await Promise.all(this.inFlight);
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
