// One workflow per operator deployment (task queue) that keeps the gateway in step with the models:
// it removes routes whose MachineModel is gone (a crash between steps, a finalizer removed by hand
// before the route went) and wakes the workflows of models whose route vanished from the gateway
// (a gateway that restarted with its routes in memory).
import { condition, continueAsNew, getExternalWorkflowHandle, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { workflowIdFor } from '../src/api.js';
import { janitorSweepSignal, resyncSignal, type JanitorInput } from './definitions.js';

const { inspectGateway, removeOrphanRoute } = proxyActivities<Activities>({
  startToCloseTimeout: '60 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '60 seconds' },
});

export async function gatewayJanitorWorkflow(input: JanitorInput): Promise<void> {
  let sweepRequested = false;
  let removed = input.removed ?? 0;
  setHandler(janitorSweepSignal, () => {
    sweepRequested = true;
  });
  for (let sweep = 0; sweep < 50; sweep++) {
    const { orphans, unpublished } = await inspectGateway();
    for (const route of orphans) {
      if ((await removeOrphanRoute(route)).removed) removed++;
    }
    for (const key of unpublished) {
      // A model without a running workflow is picked up by the informer's next event or restart.
      await getExternalWorkflowHandle(workflowIdFor(key.namespace, key.name))
        .signal(resyncSignal, { requestedBy: 'gateway janitor: route missing on the gateway' })
        .catch(() => undefined);
    }
    sweepRequested = false;
    await condition(() => sweepRequested, `${input.intervalSeconds} seconds`, { summary: 'wait for the next gateway sweep' });
  }
  await continueAsNew<typeof gatewayJanitorWorkflow>({ ...input, removed });
}
