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
//   (src/sharding/queue-drains.ts).
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { moveSignal, workflowType } from '../../workflows/definitions.js';
import { rolloutWorkflowType } from '../../workflows/rollout-definitions.js';
import { nameAttribute, namespaceAttribute } from '../../workflows/search-attributes.js';
import type { SignalRequest } from '../informer/event-filter.js';
import { quote } from '../core/visibility-queries.js';

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
  /** Unpolled queues where workflows of this replica's models, or rollouts, run. */
  stranded: string[];
}

/** What the look does with one running model workflow. Pure. */
export function sweepStep(
  w: { namespace: string; taskQueue: string },
  known: 'present' | 'absent' | 'unknown',
  sweep: Pick<WorkflowSweep, 'queueFor' | 'polled'>,
): { deleted: boolean; moveTo?: string; stranded: boolean } {
  const own = sweep.queueFor?.(w.namespace);
  return {
    deleted: known === 'absent',
    moveTo: known === 'present' && own !== undefined && own !== w.taskQueue ? own : undefined,
    // Another replica's model: its owner drains for it.
    stranded: known !== 'unknown' && !sweep.polled(w.taskQueue),
  };
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
    const step = sweepStep({ namespace, taskQueue: w.taskQueue }, sweep.lookup(namespace, name), sweep);
    if (step.stranded) stranded.add(w.taskQueue);
    if (step.deleted) {
      const uid = typeof w.memo?.uid === 'string' ? w.memo.uid : undefined;
      sweep.enqueue({ namespace, name, signal: 'deleted', hint: { source: 'MachineModel', event: 'deleted' }, uid });
      vanished++;
    }
    if (step.moveTo) {
      try {
        await client.workflow.getHandle(w.workflowId, w.runId).signal(moveSignal, { taskQueue: step.moveTo });
        moved++;
      } catch (err) {
        // It ended, or continued as new: the next look sees its new run. Any other failure is counted
        // and left to the next look too, rather than starting this one again.
        if (!(err instanceof WorkflowNotFoundError)) failed++;
      }
    }
  }
  // A rollout keeps the queue it started on after its model moved: one on an unpolled queue needs a
  // drain as long as it runs, whoever's model it is (nothing else would show it after a restart).
  const unpolled = sweep.queueFor ? sweep.taskQueues.filter((q) => !sweep.polled(q)) : [];
  if (unpolled.length > 0) {
    const query = `WorkflowType = ${quote(rolloutWorkflowType)} AND ExecutionStatus = 'Running' AND TaskQueue IN (${unpolled.map(quote).join(', ')})`;
    for await (const w of client.workflow.list({ query })) stranded.add(w.taskQueue);
  }
  return { vanished, moved, failed, stranded: [...stranded].sort() };
}
