// The task queues of an install under its shard layout: the one a namespace's workflows belong on,
// and those a worker of this layout polls.
import { installQueues, shardOf, shardTaskQueue, type ShardLayout } from '../core/shards.js';

export interface QueueLayout {
  /** With shards: the queue of the namespace's shard. Absent: every workflow belongs on the base queue. */
  queueFor?: (namespace: string) => string;
  polled(queue: string): boolean;
}

export function queueLayout(base: string, layout: ShardLayout): QueueLayout {
  // The base queue and the current layout's shard queues (installQueues lists them in that order).
  const polled = new Set(installQueues(base).slice(0, layout.count + 1));
  return {
    queueFor: layout.count > 0 ? (namespace) => shardTaskQueue(base, shardOf(namespace, layout)) : undefined,
    polled: (queue) => polled.has(queue),
  };
}
