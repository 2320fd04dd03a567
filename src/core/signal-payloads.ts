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
  return image === undefined || modelPath === undefined ? undefined : { ...raw, image, modelPath };
};

/**
 * A rollout report with what the model's workflow reads of it well typed: the sender's names, the
 * view's revision, the ask's numbers, the result's outcome; undefined otherwise. Judging whether it
 * counts is judgeReport's.
 */
export function reportOf<R extends { view: { revision: Revision } }>(raw: unknown): R | undefined {
  if (!isObject(raw) || !isObject(raw.view) || !revisionOf(raw.view.revision)) return undefined;
  if (raw.from !== undefined && !senderOf(raw.from)) return undefined;
  const want = raw.want;
  if (
    want !== undefined &&
    !(isObject(want) && ['step', 'replicas', 'weight', 'seq'].every((k) => num(want[k]) !== undefined))
  )
    return undefined;
  const result = raw.result;
  if (
    result !== undefined &&
    !(isObject(result) && ['Promoted', 'RolledBack', 'Aborted'].includes(str(result.outcome) ?? ''))
  )
    return undefined;
  return raw as unknown as R;
}

function senderOf(raw: unknown): ReportSender | undefined {
  if (!isObject(raw)) return undefined;
  const workflowId = str(raw.workflowId);
  const firstRunId = str(raw.firstRunId);
  return workflowId === undefined || firstRunId === undefined ? undefined : { workflowId, firstRunId };
}
