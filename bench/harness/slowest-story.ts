// Where the Ready lag of the slowest model went: its workflow's history (every run) as one line per
// event, timed from the moment its Deployment became available. Signals say what woke it, timers how
// long it meant to wait, workflow tasks how long each waited in Temporal's queue.
import type { Client, WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];
type Payload = NonNullable<NonNullable<HistoryEvent['userMetadata']>['summary']>;

const millisOf = (t: { seconds?: unknown; nanos?: number | null } | null | undefined): number =>
  t ? Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6 : 0;

function decoded(p: Payload | null | undefined): unknown {
  try {
    return p ? defaultPayloadConverter.fromPayload(p as never) : undefined;
  } catch {
    return undefined;
  }
}

/** What one event says, in a few words; undefined for events that say nothing about timing. */
function describe(e: HistoryEvent, scheduledAt: Map<string, number>): string | undefined {
  const summary = decoded(e.userMetadata?.summary);
  const suffix = typeof summary === 'string' ? `: ${summary}` : '';
  if (e.workflowExecutionSignaledEventAttributes) {
    const a = e.workflowExecutionSignaledEventAttributes;
    const hint = decoded(a.input?.payloads?.[0]) as Record<string, unknown> | undefined;
    const what =
      hint && typeof hint === 'object'
        ? ` ${hint.source ?? ''} ${hint.event ?? ''} rv=${hint.resourceVersion ?? '-'}`
        : '';
    return `signal ${a.signalName}${what}`;
  }
  if (e.timerStartedEventAttributes)
    return `timer ${millisOf(e.timerStartedEventAttributes.startToFireTimeout) / 1000}s${suffix}`;
  if (e.timerFiredEventAttributes) return 'timer fired';
  if (e.timerCanceledEventAttributes) return 'timer canceled';
  if (e.workflowTaskScheduledEventAttributes) {
    const a = e.workflowTaskScheduledEventAttributes;
    scheduledAt.set('task', millisOf(e.eventTime));
    // Kind 2 is a worker's sticky queue: only the worker that holds the workflow in its cache polls it.
    return `workflow task scheduled on ${a.taskQueue?.kind === 2 ? 'the sticky' : 'the normal'} queue, attempt ${a.attempt ?? 1}`;
  }
  if (e.workflowTaskTimedOutEventAttributes)
    return `workflow task timed out (${e.workflowTaskTimedOutEventAttributes.timeoutType === 2 ? 'schedule to start' : 'start to close'})`;
  if (e.workflowTaskFailedEventAttributes)
    return `workflow task failed (cause ${e.workflowTaskFailedEventAttributes.cause})`;
  if (e.workflowTaskStartedEventAttributes) {
    const waited = millisOf(e.eventTime) - (scheduledAt.get('task') ?? millisOf(e.eventTime));
    return `workflow task started (queued ${Math.round(waited)} ms)`;
  }
  if (e.workflowTaskCompletedEventAttributes) return 'workflow task completed';
  if (e.markerRecordedEventAttributes?.markerName === 'core_local_activity') {
    const data = decoded(e.markerRecordedEventAttributes.details?.data?.payloads?.[0]) as
      { activity_type?: string; attempt?: number } | undefined;
    return `local activity ${data?.activity_type ?? '?'}${suffix}`;
  }
  if (e.activityTaskScheduledEventAttributes)
    return `activity ${e.activityTaskScheduledEventAttributes.activityType?.name}`;
  if (e.activityTaskCompletedEventAttributes) return 'activity completed';
  if (e.workflowExecutionContinuedAsNewEventAttributes) return 'continued as new';
  if (e.workflowExecutionStartedEventAttributes) return 'run started';
  if (e.workflowExecutionCompletedEventAttributes) return 'run completed';
  return undefined;
}

/** One line per telling event of every run of `workflowId`, oldest run first; times from `zeroAt` (epoch ms). */
export async function storyOf(client: Client, workflowId: string, zeroAt: number): Promise<string[]> {
  const runs: { runId: string; start: number }[] = [];
  for await (const wf of client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
    runs.push({ runId: wf.runId, start: wf.startTime.getTime() });
  runs.sort((a, b) => a.start - b.start);
  const lines: string[] = [];
  for (const { runId } of runs) {
    const scheduledAt = new Map<string, number>();
    const events = (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? [];
    for (const e of events) {
      const what = describe(e, scheduledAt);
      if (what === undefined) continue;
      const t = (millisOf(e.eventTime) - zeroAt) / 1000;
      lines.push(`${t >= 0 ? '+' : ''}${t.toFixed(3)}s ${what}`);
    }
  }
  return lines;
}
