// One workflow per operator deployment (task queue) that keeps the gateway in step with the models:
// it removes routes whose MachineModel is gone (a crash between steps, a finalizer removed by hand
// before the route went) and wakes the workflows of models whose route vanished from the gateway
// (a gateway that restarted with its routes in memory, a path conflict that went away), and withdraws
// the younger of two colliding routes that were published at the same instant.
import { condition, continueAsNew, getExternalWorkflowHandle, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { workflowIdFor } from '../src/core/api.js';
import { janitorSweepSignal, resyncSignal, type JanitorInput } from './definitions.js';

const { inspectGateway, removeOrphanRoute, removeCollidingRoute } = proxyActivities<Activities>({
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
    const { orphans, collisions, unpublished } = await inspectGateway();
    for (const route of orphans) {
      if ((await removeOrphanRoute(route)).removed) removed++;
    }
    // The loser's workflow is woken below (its route is now missing) and reports the conflict.
    for (const route of collisions) {
      if ((await removeCollidingRoute(route)).removed) {
        removed++;
        unpublished.push({ namespace: route.owner.namespace, name: route.owner.name });
      }
    }
    for (const key of unpublished) {
      // A model without a running workflow is picked up by the informer's next event or restart.
      await getExternalWorkflowHandle(workflowIdFor(key.namespace, key.name))
        .signal(resyncSignal, { requestedBy: 'gateway janitor: its route is missing, withdrawn, or free to publish' })
        .catch(() => undefined);
    }
    sweepRequested = false;
    await condition(() => sweepRequested, `${input.intervalSeconds} seconds`, {
      summary: 'wait for the next gateway sweep',
    });
  }
  await continueAsNew<typeof gatewayJanitorWorkflow>({ ...input, removed });
}
