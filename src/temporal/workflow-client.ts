// Starting and signalling MachineModel workflows: used by the informer and mmctl.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { workflowIdFor } from '../core/api.js';
import type { SignalRequest } from '../informer/event-filter.js';
import { nameAttribute, namespaceAttribute, phaseAttribute } from '../../workflows/search-attributes.js';
import {
  deletedSignal,
  reconcileSignal,
  workflowType,
  type MachineModelWorkflowInput,
} from '../../workflows/definitions.js';
import type { WorkflowConfig } from '../core/reconcile-timing.js';

export interface StartSettings {
  taskQueue: string;
  /** With shards: the task queue of the namespace's shard, where its replica's worker polls. */
  queueFor?: (namespace: string) => string;
  workflow: Partial<WorkflowConfig>;
}

/**
 * Options that start a model's workflow if none runs; its search attributes and summary make it
 * findable. `uid`, when the caller knows the object's, becomes the memo the workflow would write.
 */
export function startOptions(key: { namespace: string; name: string }, settings: StartSettings, uid?: string) {
  const input: MachineModelWorkflowInput = {
    namespace: key.namespace,
    name: key.name,
    config: settings.workflow,
  };
  return {
    workflowId: workflowIdFor(key.namespace, key.name),
    taskQueue: settings.queueFor?.(key.namespace) ?? settings.taskQueue,
    args: [input] as [MachineModelWorkflowInput],
    ...(uid ? { memo: { uid } } : {}),
    typedSearchAttributes: [
      { key: namespaceAttribute, value: key.namespace },
      { key: nameAttribute, value: key.name },
      { key: phaseAttribute, value: 'Pending' },
    ],
    staticSummary: `MachineModel ${key.namespace}/${key.name}`,
  };
}

/** Delivers one informer signal request: `reconcile` with signalWithStart, `deleted` only to a running workflow. */
export function workflowSender(client: Client, settings: StartSettings) {
  return async (request: SignalRequest): Promise<void> => {
    if (request.signal === 'deleted') {
      try {
        await client.workflow
          .getHandle(workflowIdFor(request.namespace, request.name))
          .signal(deletedSignal, { uid: request.uid });
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      return;
    }
    await client.workflow.signalWithStart(workflowType, {
      ...startOptions(request, settings, request.hint.uid),
      signal: reconcileSignal,
      signalArgs: [request.hint],
    });
  };
}
