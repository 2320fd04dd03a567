// What the workflows take from a signal's payload. Anyone who may signal a workflow can send any JSON
// (`temporal workflow signal --input '{}'`), and a handler that throws fails its workflow task on every
// retry: the run would be wedged for good. So each handler reads its payload through one of these,
// which keep the well-typed fields and drop the rest (undefined when nothing usable is left). Pure.
import type { Revision } from './rollout.js';
import type { ReportSender } from './rollout-reports.js';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const defined = <T extends Json>(o: T): T =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

/** A watch event's hint: the fields of the right type; a hint of nothing usable still asks for a look. */
export function hintOf(raw: unknown): {
  source?: string;
  event?: string;
  resourceVersion?: string;
  versions?: string[];
  generation?: number;
  uid?: string;
} {
  if (!isObject(raw)) return {};
  const versions =
    Array.isArray(raw.versions) && raw.versions.every((v) => typeof v === 'string') ? raw.versions : undefined;
  return defined({
    source: str(raw.source),
    event: str(raw.event),
    resourceVersion: str(raw.resourceVersion),
    versions: versions as string[] | undefined,
    generation: num(raw.generation),
    uid: str(raw.uid),
  });
}

/** A `uid` field, when the payload has one that is a string. */
export function uidOf(raw: unknown): string | undefined {
  return isObject(raw) ? str(raw.uid) : undefined;
}

/** A rollout's answer from the model's round: its ask's number and the share set. */
export function answerOf(raw: unknown): { seq: number; weight: number } | undefined {
  if (!isObject(raw)) return undefined;
  const seq = num(raw.seq);
  const weight = num(raw.weight);
  return seq === undefined || weight === undefined ? undefined : { seq, weight };
}

const revisionOf = (raw: unknown): Revision | undefined => {
  if (!isObject(raw)) return undefined;
  const image = str(raw.image);
  const modelPath = str(raw.modelPath);
  return image === undefined || modelPath === undefined ? undefined : { image, modelPath };
};

/**
 * A rollout report rebuilt from its well-typed fields only (what reaches the status and the round:
 * the sender, the view, the ask, the result); undefined when a field it needs is missing or of
 * another type. Judging whether it counts is judgeReport's.
 */
export function reportOf<R extends { view: { revision: Revision } }>(raw: unknown): R | undefined {
  if (!isObject(raw)) return undefined;
  const from = raw.from === undefined ? undefined : senderOf(raw.from);
  const view = viewOf(raw.view);
  const want = raw.want === undefined ? undefined : wantOf(raw.want);
  const result = raw.result === undefined ? undefined : resultOf(raw.result);
  if (
    !view ||
    (raw.from !== undefined && !from) ||
    (raw.want !== undefined && !want) ||
    (raw.result !== undefined && !result)
  )
    return undefined;
  return defined({ from, view, want, result }) as unknown as R;
}

const phases: readonly string[] = ['Progressing', 'Paused', 'Promoted', 'RolledBack', 'Aborted'] as const;

function viewOf(raw: unknown): Json | undefined {
  if (!isObject(raw)) return undefined;
  const revision = revisionOf(raw.revision);
  const stable = raw.stable === undefined ? undefined : revisionOf(raw.stable);
  const [step, steps, weight] = [num(raw.step), num(raw.steps), num(raw.weight)];
  const phase = str(raw.phase);
  const verdicts = Array.isArray(raw.verdicts) ? raw.verdicts.filter((v) => typeof v === 'string') : undefined;
  if (!revision || step === undefined || steps === undefined || weight === undefined || !phases.includes(phase ?? ''))
    return undefined;
  const pausedBy = str(raw.pausedBy);
  return defined({
    revision,
    stable,
    phase,
    step,
    steps,
    weight,
    pausedBy: pausedBy === 'person' || pausedBy === 'analysis' ? pausedBy : undefined,
    pauseSecondsLeft: num(raw.pauseSecondsLeft),
    pauseEndsAt: str(raw.pauseEndsAt),
    verdicts,
    message: str(raw.message),
  });
}

function wantOf(raw: unknown): Json | undefined {
  if (!isObject(raw)) return undefined;
  const [step, replicas, weight, seq] = [num(raw.step), num(raw.replicas), num(raw.weight), num(raw.seq)];
  return [step, replicas, weight, seq].some((v) => v === undefined) ? undefined : { step, replicas, weight, seq };
}

function resultOf(raw: unknown): Json | undefined {
  if (!isObject(raw)) return undefined;
  const outcome = str(raw.outcome);
  const check = str(raw.check);
  if (!['Promoted', 'RolledBack', 'Aborted'].includes(outcome ?? '')) return undefined;
  return defined({
    outcome,
    check: check === 'Ready' || check === 'ErrorRate' ? check : undefined,
    message: str(raw.message) ?? '',
    revision: revisionOf(raw.revision),
    view: viewOf(raw.view),
  });
}

function senderOf(raw: unknown): ReportSender | undefined {
  if (!isObject(raw)) return undefined;
  const workflowId = str(raw.workflowId);
  const firstRunId = str(raw.firstRunId);
  return workflowId === undefined || firstRunId === undefined ? undefined : { workflowId, firstRunId };
}
