// Models deleted while no informer watched. Without a finalizer nothing held them for the operator,
// and a first list cannot report what is no longer there: after it, every running workflow whose
// model the informer does not know is told of the deletion, so it finishes now instead of at its
// next timer (the drift check, up to 11 hours away).
import type { Client } from '@temporalio/client';
import { workflowType } from '../../workflows/definitions.js';
import { nameAttribute, namespaceAttribute } from '../../workflows/search-attributes.js';
import type { SignalRequest } from './event-filter.js';

export interface VanishedSweep {
  /** The queues whose workflows to look at: the base queue, and with shards every shard's queue. */
  taskQueues: string[];
  /** The informer's namespaces; empty for all. */
  namespaces: string[];
  /** The informer's cache holds a model of this name, or cannot say. */
  known(namespace: string, name: string): boolean;
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

/** Signals `deleted` to each running workflow whose model is gone; returns how many. */
export async function signalVanishedModels(client: Client, sweep: VanishedSweep): Promise<number> {
  let vanished = 0;
  for await (const w of client.workflow.list({ query: runningModelsQuery(sweep.taskQueues, sweep.namespaces) })) {
    const namespace = w.typedSearchAttributes.get(namespaceAttribute);
    const name = w.typedSearchAttributes.get(nameAttribute);
    if (!namespace || !name || sweep.known(namespace, name)) continue;
    const uid = typeof w.memo?.uid === 'string' ? w.memo.uid : undefined;
    sweep.enqueue({
      namespace,
      name,
      signal: 'deleted',
      hint: { source: 'MachineModel', event: 'deleted' },
      uid,
    });
    vanished++;
  }
  return vanished;
}
