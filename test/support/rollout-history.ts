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
    /** The weights the rollout gave the canary, in order (its input's `weight`). */
    weightsSet: () =>
      events
        .filter((e) => isScheduled(e, 'setCanaryWeight'))
        .map((e) => {
          const data = e.activityTaskScheduledEventAttributes?.input?.payloads?.[0]?.data;
          return (JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { weight: number }).weight;
        }),
    /** Index of the event that scheduled the canary's weight. */
    weightSetAt: events.findIndex((e) => isScheduled(e, 'setCanaryWeight')),
  };
}
