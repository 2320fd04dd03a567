// One workflow for the whole operator: finds gateway routes whose MachineModel is gone (a crash
// between steps, a finalizer removed by hand before the route went) and removes them.
import { condition, continueAsNew, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { janitorSweepSignal, type JanitorInput } from './definitions.js';

const { findOrphanRoutes, removeOrphanRoute } = proxyActivities<Activities>({
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
    for (const route of await findOrphanRoutes()) {
      if ((await removeOrphanRoute(route)).removed) removed++;
    }
    sweepRequested = false;
    await condition(() => sweepRequested, `${input.intervalSeconds} seconds`, { summary: 'wait for the next drift check' });
  }
  await continueAsNew<typeof gatewayJanitorWorkflow>({ ...input, removed });
}
