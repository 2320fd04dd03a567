// Workers for queues of the install that the current layout leaves unpolled (a shard past a lowered
// count, the shard queues of an install no longer sharded, a queue a forged move named), while
// workflows run there: a workflow of this replica's shards takes its move (moveToTaskQueue) on such
// a worker and continues as new on its own queue, and one whose model is gone finishes there. A
// rollout started on the queue finishes there too. Each drain stops once nothing runs on its queue.
import type { Logger } from 'pino';
import type { ShardWorker } from './shard-placement.js';

export interface DrainParts {
  /** Gives up (rejects) rather than wait long: the next look tries again. */
  startWorker(queue: string): Promise<ShardWorker>;
  /** How many workflows, of any type, still run on the queue. */
  running(queue: string): Promise<number>;
}

export class QueueDrains {
  private readonly drains = new Map<string, ShardWorker>();
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
    for (const queue of queues) {
      if (this.stopped || this.drains.has(queue)) continue;
      try {
        const worker = await this.parts.startWorker(queue);
        if (this.stopped) {
          await worker.shutdown();
          return;
        }
        this.drains.set(queue, worker);
        this.log.info({ taskQueue: queue }, 'draining a queue no shard of this layout polls');
        // A drain that fails by itself is only a drain: the next look starts another.
        worker.run.catch((err: unknown) => {
          this.log.warn({ err, taskQueue: queue }, 'a queue drain failed');
          if (this.drains.get(queue) === worker) this.drains.delete(queue);
        });
      } catch (err) {
        this.log.warn({ err, taskQueue: queue }, 'could not start a queue drain; the next look tries again');
      }
    }
    if (this.drains.size > 0 && !this.timer) {
      this.timer = setInterval(() => void this.check(), this.checkEveryMs);
      this.timer.unref();
    }
  }

  /** Stops each drain whose queue has nothing running any more. */
  async check(): Promise<void> {
    for (const [queue, worker] of [...this.drains]) {
      const left = await this.parts.running(queue).catch(() => undefined);
      if (left !== 0 || this.drains.get(queue) !== worker) continue;
      this.drains.delete(queue);
      await worker.shutdown();
      this.log.info({ taskQueue: queue }, 'a drained queue has nothing running; its worker stopped');
    }
    if (this.drains.size === 0) this.stopTimer();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopTimer();
    const workers = [...this.drains.values()];
    this.drains.clear();
    await Promise.all(workers.map((w) => w.shutdown()));
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
