// A rollout workflow's history, read for the durability tests: how often an activity was scheduled,
// and the shares the model's round answered its asks with.
import type { Client } from '@temporalio/client';

export async function rolloutHistory(client: Client, workflowId: string) {
  const handle = client.workflow.getHandle(workflowId);
  const events = (await handle.fetchHistory()).events ?? [];
  const isScheduled = (e: (typeof events)[number], name: string) =>
    e.activityTaskScheduledEventAttributes?.activityType?.name === name;
  const answers = events.flatMap((e, index) => {
    const signal = e.workflowExecutionSignaledEventAttributes;
    if (signal?.signalName !== 'canaryAnswered') return [];
    const data = signal.input?.payloads?.[0]?.data;
    return [{ index, weight: (JSON.parse(Buffer.from(data ?? []).toString('utf8')) as { weight: number }).weight }];
  });
  /** Each change of the canary's share, as the round answered (from none at the start). */
  const changes = answers.filter((a, i) => a.weight !== (i === 0 ? 0 : answers[i - 1]!.weight));
  return {
    handle,
    events,
    scheduled: (name: string) => events.filter((e) => isScheduled(e, name)).length,
    /** The shares the canary was given, in order. */
    weightsSet: () => changes.map((a) => a.weight),
    /** The timers that fired from event `from` on, in seconds (a wait a signal ended early is not one). */
    firedTimerSeconds: (from: number) => {
      const started = new Map(
        events.flatMap((e) => {
          const t = e.timerStartedEventAttributes;
          const d = t?.startToFireTimeout;
          return t ? [[t.timerId, Number(String(d?.seconds ?? 0)) + (d?.nanos ?? 0) / 1e9] as const] : [];
        }),
      );
      return events
        .slice(from)
        .flatMap((e) => (e.timerFiredEventAttributes ? [started.get(e.timerFiredEventAttributes.timerId) ?? 0] : []));
    },
    /** Index of the event at which the canary got its first share. */
    weightSetAt: changes.find((a) => a.weight > 0)?.index ?? -1,
  };
}
