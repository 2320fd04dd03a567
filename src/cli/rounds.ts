// The reconcile rounds of one workflow run, read back from its event history: what woke each round,
// what it changed, what it saw and how long it took. Pure: events in, rounds out (no client here).
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { Phase } from '../core/api.js';
import type { Readiness } from '../core/status.js';
import { readinessSummary } from '../core/step-summaries.js';
import { isEchoOf, type VersionedHint } from '../core/watch-echoes.js';

export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type Payload = temporal.api.common.v1.IPayload;
type Time = { seconds?: unknown; nanos?: number | null } | null | undefined;

export interface RoundRecord {
  runId: string;
  /** ISO time the round's first step was scheduled. */
  startedAt: string;
  /** From the first step's scheduling to the last step's result. */
  durationMs: number;
  /** What woke the round: signals, the update, a timer, the start of the run. */
  triggers: string[];
  /** What the round wrote, in the activities' words ("Deployment updated", "finalizer removed"). */
  changes: string[];
  phaseBefore?: Phase;
  phaseAfter?: Phase;
  /** The rollout as the round saw it, e.g. "1 of 2 ready". */
  readiness?: string;
  /** Failed attempts and terminal failures, one line each. */
  errors: string[];
  /** The round found the MachineModel gone: the run ends. */
  gone?: boolean;
  /** Each step: its Web UI summary (or activity type), with the attempts it took when more than one. */
  steps: string[];
}

const millisOf = (t: Time): number => (t ? Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6 : 0);

function decoded<T>(p: Payload | null | undefined): T | undefined {
  try {
    return p ? (defaultPayloadConverter.fromPayload(p as never) as T) : undefined;
  } catch {
    return undefined;
  }
}

/** The SDK's local-activity marker data (sdk-core external_data.proto LocalActivityMarkerData). */
interface MarkerData {
  activity_type?: string;
  attempt?: number;
  original_schedule_time?: Time;
}

interface Hint {
  source?: string;
  event?: string;
  resourceVersion?: string;
  versions?: string[];
  generation?: number;
}

/** A step as its history records it: a local-activity marker, or a regular activity's closing event. */
interface FinishedStep {
  local: boolean;
  type: string;
  summary?: string;
  startedAt: number;
  endedAt: number;
  attempts: number;
  result: unknown;
  failure?: string;
}

const timerSummariesInsideARound = ['wait for the gateway to come back', 'rate limit'];
const dedupe = (items: string[]): string[] => {
  const counts = new Map<string, number>();
  for (const i of items) counts.set(i, (counts.get(i) ?? 0) + 1);
  return [...counts].map(([item, n]) => (n > 1 ? `${item} ×${n}` : item));
};

function signalTrigger(name: string | null | undefined, arg: unknown): string {
  if (name === 'reconcile') {
    const h = (arg ?? {}) as Hint;
    const generation = h.source === 'MachineModel' && h.generation ? ` (generation ${h.generation})` : '';
    // A coalesced signal names its last event; the others are counted.
    const others = (h.versions?.length ?? 1) - 1;
    const more = others > 0 ? ` and ${others} more event${others > 1 ? 's' : ''}` : '';
    return `${h.source ?? 'object'} ${h.event ?? 'changed'}${generation}${more}`;
  }
  if (name === 'resync') {
    const by = (arg as { requestedBy?: string } | undefined)?.requestedBy;
    return by ? `resync by ${by}` : 'resync';
  }
  if (name === 'deleted') return 'MachineModel deleted';
  return `signal ${name ?? '?'}`;
}

function readinessLine(r: unknown): string | undefined {
  const x = r as Readiness | undefined;
  return x && typeof x === 'object' && x.found !== undefined ? readinessSummary(x) : undefined;
}

function failureLine(f: temporal.api.failure.v1.IFailure | null | undefined): string {
  let cause = f;
  while (cause?.cause) cause = cause.cause;
  return cause?.message || f?.message || 'failed';
}

/** The steps that begin a round: each reads the object (`readAndApply` may apply its children and write the status too). */
const readSteps = new Set(['readModel', 'readAndApply']);

/** A regular activity's scheduling, kept until its closing event names it. */
interface Scheduled {
  type: string;
  summary?: string;
  at: number;
}

/**
 * Splits one run's history into rounds. A round begins with its read step and holds every step
 * until the next one; `phaseBefore` is the phase the run started with (carried across continue-as-new).
 */
export function roundsOf(runId: string, events: HistoryEvent[]): RoundRecord[] {
  const reader = new RoundReader(runId);
  for (const e of events) reader.read(e);
  return reader.rounds;
}

/** Reads a history event by event: what wakes the next round, then the steps of each round. */
class RoundReader {
  readonly rounds: RoundRecord[] = [];
  private current: RoundRecord | undefined;
  private phase: Phase | undefined;
  /** What woke the round not yet begun. */
  private wakes: string[] = [];
  /** What the current round wrote: the watch events they cause wake no round. */
  private written: string[] = [];
  private readonly timers = new Map<string, string | undefined>();
  private readonly scheduled = new Map<string, Scheduled>();
  // A regular activity's retries are no events of their own: its started event holds the last attempt.
  private readonly attempts = new Map<string, number>();

  constructor(private readonly runId: string) {}

  read(e: HistoryEvent): void {
    const at = millisOf(e.eventTime as Time);
    const summary = decoded<string>(e.userMetadata?.summary);
    if (e.workflowExecutionStartedEventAttributes) {
      this.started(e.workflowExecutionStartedEventAttributes);
    } else if (e.markerRecordedEventAttributes) {
      this.marker(e.markerRecordedEventAttributes, summary, at);
    } else if (e.activityTaskScheduledEventAttributes) {
      const type = e.activityTaskScheduledEventAttributes.activityType?.name ?? '?';
      this.scheduled.set(String(e.eventId), { type, summary, at });
      this.beginStep(type, at);
    } else if (e.activityTaskStartedEventAttributes) {
      this.attempts.set(String(e.eventId), e.activityTaskStartedEventAttributes.attempt ?? 1);
    } else if (
      e.activityTaskCompletedEventAttributes ||
      e.activityTaskFailedEventAttributes ||
      e.activityTaskTimedOutEventAttributes
    ) {
      this.activityClosed(e, at);
    } else if (e.workflowExecutionSignaledEventAttributes) {
      this.signaled(e.workflowExecutionSignaledEventAttributes);
    } else if (e.workflowExecutionUpdateAcceptedEventAttributes) {
      const req = e.workflowExecutionUpdateAcceptedEventAttributes.acceptedRequest?.input;
      const by = decoded<{ requestedBy?: string }>(req?.args?.payloads?.[0])?.requestedBy;
      this.wakes.push(`${req?.name ?? 'update'}${by ? ` by ${by}` : ''}`);
    } else if (e.timerStartedEventAttributes) {
      const a = e.timerStartedEventAttributes;
      const seconds = millisOf(a.startToFireTimeout as Time) / 1000;
      this.timers.set(a.timerId ?? '', summary ?? `${seconds} s`);
    } else if (e.timerFiredEventAttributes) {
      const what = this.timers.get(e.timerFiredEventAttributes.timerId ?? '');
      if (what && !timerSummariesInsideARound.some((s) => what.startsWith(s))) this.wakes.push(`timer: ${what}`);
    }
  }

  private started(a: temporal.api.history.v1.IWorkflowExecutionStartedEventAttributes): void {
    const input = decoded<{ state?: { phase?: Phase } }>(a.input?.payloads?.[0]);
    this.phase = input?.state?.phase;
    this.wakes.push(a.continuedExecutionRunId ? 'continued as new' : 'workflow started');
  }

  /** A local activity's marker: the step and its result in one event. */
  private marker(m: temporal.api.history.v1.IMarkerRecordedEventAttributes, summary: string | undefined, at: number) {
    if (m.markerName !== 'core_local_activity') return;
    const data = decoded<MarkerData>(m.details?.data?.payloads?.[0]);
    const type = data?.activity_type ?? '?';
    const startedAt = millisOf(data?.original_schedule_time) || at;
    const result = decoded<unknown>(m.details?.result?.payloads?.[0]);
    const failure = m.failure ? failureLine(m.failure) : undefined;
    this.endStep({ local: true, type, summary, startedAt, endedAt: at, attempts: data?.attempt ?? 1, result, failure });
  }

  /** A regular activity's completion, failure or timeout, with what its scheduling said. */
  private activityClosed(e: HistoryEvent, at: number): void {
    const done = e.activityTaskCompletedEventAttributes;
    const failed = e.activityTaskFailedEventAttributes ?? e.activityTaskTimedOutEventAttributes;
    const a = (done ?? failed)!;
    const s = this.scheduled.get(String(a.scheduledEventId));
    if (!s) return;
    this.endStep({
      local: false,
      type: s.type,
      summary: s.summary,
      startedAt: s.at,
      endedAt: at,
      attempts: this.attempts.get(String(a.startedEventId)) ?? 1,
      result: done ? decoded<unknown>(done.result?.payloads?.[0]) : undefined,
      failure: failed ? failureLine(failed.failure) : undefined,
    });
  }

  private signaled(a: temporal.api.history.v1.IWorkflowExecutionSignaledEventAttributes): void {
    const arg = decoded<Hint>(a.input?.payloads?.[0]);
    // The workflow ignores the watch events of the round before's writes (workflows/machine-model.ts).
    if (a.signalName === 'reconcile' && arg?.source !== undefined && isEchoOf(this.written, arg as VersionedHint))
      return;
    this.wakes.push(signalTrigger(a.signalName, arg));
  }

  /** Every round begins by reading the object; a step before any such read (none today) opens one too. */
  private beginStep(type: string, at: number): void {
    if (!readSteps.has(type) && this.current) return;
    this.current = {
      runId: this.runId,
      startedAt: new Date(at).toISOString(),
      durationMs: 0,
      triggers: dedupe(this.wakes),
      changes: [],
      phaseBefore: this.phase,
      errors: [],
      steps: [],
    };
    this.rounds.push(this.current);
    this.wakes = [];
    this.written = [];
  }

  private endStep({ local, type, summary, startedAt, endedAt, attempts, result, failure }: FinishedStep): void {
    // A regular activity's round began when it was scheduled.
    if (local || !this.current) this.beginStep(type, startedAt);
    const round = this.current!;
    round.steps.push(`${summary ?? type}${attempts > 1 ? ` (${attempts} attempts)` : ''}`);
    round.durationMs = Math.max(round.durationMs, Math.round(endedAt - Date.parse(round.startedAt)));
    if (failure !== undefined) {
      round.errors.push(`${type}: ${failure}`);
      return;
    }
    this.noteResult(round, type, result);
  }

  private noteResult(round: RoundRecord, type: string, result: unknown): void {
    if (type === 'readAndApply') return this.noteReadAndApply(round, result);
    if (type === 'readModel' && result === null) round.gone = true;
    const r = (result ?? {}) as Record<string, unknown>;
    if (Array.isArray(r.changes)) round.changes.push(...(r.changes as string[]));
    if (Array.isArray(r.written)) this.written.push(...(r.written as string[]));
    if (typeof r.written === 'string') this.written.push(r.written);
    if (type === 'ensureFinalizer' && r.added) round.changes.push('finalizer added');
    if (type === 'removeFinalizer' && r.removed) round.changes.push('finalizer removed');
    if (type === 'unregisterRoute' && r.removed) round.changes.push('gateway route removed');
    const readiness = readinessLine(type === 'applyChildren' ? r.readiness : undefined);
    if (readiness) round.readiness = readiness;
    if (type === 'writeStatus' && typeof r.phase === 'string') this.notePhase(round, r.phase as Phase, r.conditions);
  }

  /** One step that read the model, and may have applied its children and written its status too. */
  private noteReadAndApply(round: RoundRecord, result: unknown): void {
    const { model, applied, refused, reported } = (result ?? {}) as {
      model?: unknown;
      applied?: unknown;
      refused?: { message?: string };
      reported?: { status?: unknown; summary?: string };
    };
    this.noteResult(round, 'readModel', model ?? null);
    if (applied) this.noteResult(round, 'applyChildren', applied);
    // Read as a failed applyChildren step would be.
    if (refused) round.errors.push(`applyChildren: ${refused.message ?? 'refused'}`);
    // Read as the status step would be, whose summary it carries.
    if (reported) {
      if (reported.summary) round.steps.push(reported.summary);
      this.noteResult(round, 'writeStatus', reported.status);
    }
  }

  /** The phase the status step wrote; a Failed one's reason when no step's error said it. */
  private notePhase(round: RoundRecord, phase: Phase, conditions: unknown): void {
    this.phase = phase;
    round.phaseAfter = phase;
    if (phase !== 'Failed') return;
    const ready = (conditions as { type: string; reason: string; message: string }[] | undefined)?.find(
      (c) => c.type === 'Ready',
    );
    // The failed step's own error says the same: add the reason only when nothing did.
    if (ready && !round.errors.some((e) => e.endsWith(ready.message)))
      round.errors.push(`${ready.reason}: ${ready.message}`);
  }
}
