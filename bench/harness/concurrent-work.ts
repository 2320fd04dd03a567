// Whether one workflow's history shows two workers at work at once: each workflow task and each
// activity attempt runs from its Started event (which names the worker's identity) to the event that
// closes it. Two intervals of different identities that overlap mean two replicas worked on the model
// at the same time. A task whose worker died ends at its timeout, before the next worker starts it.
import { tsToMs } from '@temporalio/common/lib/time.js';
import type { google } from '@temporalio/proto';

/** An event id as the SDK gives it (a Long) or as written by hand. */
type EventId = { toString(): string } | number | null | undefined;
type Started = { scheduledEventId?: EventId; identity?: string | null } | null;
type Closed = { scheduledEventId?: EventId } | null;

/** The fields of a history event read here. */
export interface HistoryEvent {
  eventTime?: google.protobuf.ITimestamp | null;
  workflowTaskStartedEventAttributes?: Started;
  workflowTaskCompletedEventAttributes?: Closed;
  workflowTaskFailedEventAttributes?: Closed;
  workflowTaskTimedOutEventAttributes?: Closed;
  activityTaskStartedEventAttributes?: Started;
  activityTaskCompletedEventAttributes?: Closed;
  activityTaskFailedEventAttributes?: Closed;
  activityTaskTimedOutEventAttributes?: Closed;
  activityTaskCanceledEventAttributes?: Closed;
}

interface Interval {
  identity: string;
  from: number;
  to: number;
}

const millis = (e: HistoryEvent) =>
  Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);

/** The workers' busy intervals, from the Started events to the events closing them (open ones end at `end`). */
export function workIntervals(events: HistoryEvent[], end = Infinity): Interval[] {
  const open = new Map<string, { identity: string; from: number }>();
  const intervals: Interval[] = [];
  const close = (key: string, e: HistoryEvent) => {
    const started = open.get(key);
    if (!started) return;
    open.delete(key);
    intervals.push({ ...started, to: millis(e) });
  };
  for (const e of events) {
    const wtStarted = e.workflowTaskStartedEventAttributes;
    if (wtStarted) open.set(`wt${wtStarted.scheduledEventId}`, { identity: wtStarted.identity ?? '', from: millis(e) });
    const wtClosed =
      e.workflowTaskCompletedEventAttributes ??
      e.workflowTaskFailedEventAttributes ??
      e.workflowTaskTimedOutEventAttributes;
    if (wtClosed) close(`wt${wtClosed.scheduledEventId}`, e);
    const atStarted = e.activityTaskStartedEventAttributes;
    if (atStarted) open.set(`at${atStarted.scheduledEventId}`, { identity: atStarted.identity ?? '', from: millis(e) });
    const atClosed =
      e.activityTaskCompletedEventAttributes ??
      e.activityTaskFailedEventAttributes ??
      e.activityTaskTimedOutEventAttributes ??
      e.activityTaskCanceledEventAttributes;
    if (atClosed) close(`at${atClosed.scheduledEventId}`, e);
  }
  for (const started of open.values()) intervals.push({ ...started, to: end });
  return intervals;
}

/** Pairs of intervals of two different workers that overlap. */
export function concurrentWork(intervals: Interval[]): [Interval, Interval][] {
  const sorted = [...intervals].sort((a, b) => a.from - b.from);
  const pairs: [Interval, Interval][] = [];
  for (let i = 0; i < sorted.length; i++)
    for (let j = i + 1; j < sorted.length && sorted[j]!.from < sorted[i]!.to; j++)
      if (sorted[j]!.identity !== sorted[i]!.identity) pairs.push([sorted[i]!, sorted[j]!]);
  return pairs;
}

/** The identities that worked on the history. */
export function workers(intervals: Interval[]): Set<string> {
  return new Set(intervals.map((i) => i.identity));
}
