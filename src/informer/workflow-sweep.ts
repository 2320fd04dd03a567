// A look at every running model workflow of the install in the informer's namespaces, after its first
// list, after each change of this replica's shards, and every 10 minutes:
// - Models deleted while no informer watched. Without a finalizer nothing held them for the operator,
//   and a first list cannot report what is no longer there: each running workflow whose model the
//   informer does not know is told of the deletion, so it finishes now instead of at its next timer
//   (the drift check, up to 11 hours away).
// - A workflow of this replica's shards that runs on another queue of the install (it started before
//   the install had shards, or under another count or hash of them, or the install has none any more)
//   is told to move to its own queue, where it continues as new. Only a polled queue can take the
//   signal: every replica polls the base queue, and the shard queues of the current layout are held.
//   The queues of such workflows that the layout leaves unpolled are returned, to be drained
//   (src/process/queue-drains.ts).
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { moveSignal, workflowType } from '../../workflows/definitions.js';
import { nameAttribute, namespaceAttribute } from '../../workflows/search-attributes.js';
import type { SignalRequest } from './event-filter.js';

export interface WorkflowSweep {
  /** The queues whose workflows to look at: the base queue, and with shards every shard's queue. */
  taskQueues: string[];
  /** The informer's namespaces; empty for all. */
  namespaces: string[];
  /** What the informer's cache holds of the model; 'unknown' for another replica's shard. */
  lookup(namespace: string, name: string): 'present' | 'absent' | 'unknown';
  /** The queue the namespace's workflows belong on; absent: no moves (no worker in this process). */
  queueFor?: (namespace: string) => string;
  /** Whether a worker of the current layout polls the queue. */
  polled(queue: string): boolean;
  enqueue(request: SignalRequest): void;
}

/** Visibility query for the running workflows of the models in the informer's namespaces. */
export function runningModelsQuery(taskQueues: string[], namespaces: string[]): string {
  const quote = (s: string) => `'${s.replace(/'/g, "\\'")}'`;
  const clauses = [
    `WorkflowType = ${quote(workflowType)}`,
    `ExecutionStatus = 'Running'`,
    taskQueues.length === 1
      ? `TaskQueue = ${quote(taskQueues[0]!)}`
      : `TaskQueue IN (${taskQueues.map(quote).join(', ')})`,
  ];
  if (namespaces.length) clauses.push(`${namespaceAttribute.name} IN (${namespaces.map(quote).join(', ')})`);
  return clauses.join(' AND ');
}

export interface SweepResult {
  vanished: number;
  moved: number;
  /** Moves that could not be sent (not for want of the workflow). */
  failed: number;
  /** Unpolled queues where workflows of this replica's models run. */
  stranded: string[];
}

/** Signals `deleted` to each running workflow whose model is gone, and moves those on another queue. */
export async function sweepModelWorkflows(client: Client, sweep: WorkflowSweep): Promise<SweepResult> {
  let vanished = 0;
  let moved = 0;
  let failed = 0;
  const stranded = new Set<string>();
  for await (const w of client.workflow.list({ query: runningModelsQuery(sweep.taskQueues, sweep.namespaces) })) {
    const namespace = w.typedSearchAttributes.get(namespaceAttribute);
    const name = w.typedSearchAttributes.get(nameAttribute);
    if (!namespace || !name) continue;
    const known = sweep.lookup(namespace, name);
    if (known !== 'unknown' && !sweep.polled(w.taskQueue)) stranded.add(w.taskQueue);
    if (known === 'absent') {
      const uid = typeof w.memo?.uid === 'string' ? w.memo.uid : undefined;
      sweep.enqueue({ namespace, name, signal: 'deleted', hint: { source: 'MachineModel', event: 'deleted' }, uid });
      vanished++;
    }
    const taskQueue = sweep.queueFor?.(namespace);
    if (known === 'present' && taskQueue && w.taskQueue !== taskQueue) {
      try {
        await client.workflow.getHandle(w.workflowId, w.runId).signal(moveSignal, { taskQueue });
        moved++;
      } catch (err) {
        // It ended, or continued as new: the next look sees its new run. Any other failure is counted
        // and left to the next look too, rather than starting this one again.
        if (!(err instanceof WorkflowNotFoundError)) failed++;
      }
    }
  }
  return { vanished, moved, failed, stranded: [...stranded].sort() };
}
