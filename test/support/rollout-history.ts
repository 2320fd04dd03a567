// A rollout workflow's history, read for the durability tests: how often an activity was scheduled,
// and where the canary got its weight.
import type { Client } from '@temporalio/client';

export async function rolloutHistory(client: Client, workflowId: string) {
  const handle = client.workflow.getHandle(workflowId);
  const events = (await handle.fetchHistory()).events ?? [];
  const isScheduled = (e: (typeof events)[number], name: string) =>
    e.activityTaskScheduledEventAttributes?.activityType?.name === name;
  return {
    handle,
    events,
    scheduled: (name: string) => events.filter((e) => isScheduled(e, name)).length,
    /** Index of the event that scheduled the canary's weight. */
    weightSetAt: events.findIndex((e) => isScheduled(e, 'setCanaryWeight')),
  };
}
