// The gateway janitor: one workflow per install that removes routes whose MachineModel is gone.
import type { Client } from '@temporalio/client';
import { janitorWorkflowId, janitorWorkflowType, type JanitorInput } from '../../workflows/definitions.js';

/** Idempotent across replicas: the one janitor keeps running, the others' starts are no-ops. */
export async function startGatewayJanitor(client: Client, taskQueue: string, intervalSeconds: number): Promise<void> {
  const input: JanitorInput = { intervalSeconds };
  await client.workflow.start(janitorWorkflowType, {
    workflowId: janitorWorkflowId(taskQueue),
    taskQueue,
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    staticSummary: 'removes gateway routes whose MachineModel is gone',
  });
}
