// A look at every running model workflow of the install in the informer's namespaces, after its first
// list and after each change of this replica's shards:
// - Models deleted while no informer watched. Without a finalizer nothing held them for the operator,
//   and a first list cannot report what is no longer there: each running workflow whose model the
//   informer does not know is told of the deletion, so it finishes now instead of at its next timer
//   (the drift check, up to 11 hours away).
// - With shards, a workflow of this replica's shards that runs on another queue of the install (it
//   started before the install had shards, or under another count or hash of them) is told to move to
//   its shard's queue, where it continues as new. Only a queue that some worker polls can take the
//   signal: every replica polls the base queue, and the shard queues of the current layout are held.
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
  /** With shards: the queue the namespace's workflows belong on. */
  queueFor?: (namespace: string) => string;
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

/** Signals `deleted` to each running workflow whose model is gone, and moves those on another queue. */
export async function sweepModelWorkflows(
  client: Client,
  sweep: WorkflowSweep,
): Promise<{ vanished: number; moved: number }> {
  let vanished = 0;
  let moved = 0;
  for await (const w of client.workflow.list({ query: runningModelsQuery(sweep.taskQueues, sweep.namespaces) })) {
    const namespace = w.typedSearchAttributes.get(namespaceAttribute);
    const name = w.typedSearchAttributes.get(nameAttribute);
    if (!namespace || !name) continue;
    const known = sweep.lookup(namespace, name);
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
        // It ended, or continued as new (the next sweep sees its new run).
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
    }
  }
  return { vanished, moved };
}
