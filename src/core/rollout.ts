// A canary rollout of a new model version: what a revision is, the plan of steps, and the verdict on
// the canary at each step. Pure and workflow-safe (docs/rollouts.md tells the whole story).
import type { MachineModelSpec, RolloutAnalysis, RolloutSpec } from './api.js';
import { describeTrouble, needsAPerson, type ContainerTrouble } from './container-troubles.js';
import { modelLocation } from './model-source.js';

/** What a rollout moves between: the fields that make a new version of the model. */
export interface Revision {
  image: string;
  /** The model's location (model-source.ts): the modelPath, or the storageUri with its expected sum. */
  modelPath: string;
}

export const revisionOf = (
  spec: Pick<MachineModelSpec, 'image' | 'modelPath' | 'storageUri' | 'sha256'>,
): Revision => ({
  image: spec.image,
  modelPath: modelLocation(spec),
});

/** The spec a revision's Deployment is built from: the spec's other fields, that revision's image and model. */
export function specOfRevision<S extends MachineModelSpec>(spec: S, r: Revision): S {
  return { ...spec, image: r.image, modelPath: r.modelPath, storageUri: undefined, sha256: undefined };
}

export const sameRevision = (a: Revision, b: Revision): boolean => a.image === b.image && a.modelPath === b.modelPath;

/** The revision a live Deployment runs: its model container's image and MODEL_SOURCE, or MODEL_PATH without one. */
export function deployedRevision(d: {
  spec?: { template?: { spec?: { containers?: { image?: string; env?: { name: string; value?: string }[] }[] } } };
}): Revision | undefined {
  const c = d.spec?.template?.spec?.containers?.[0];
  const env = (name: string) => c?.env?.find((e) => e.name === name)?.value;
  const modelPath = env('MODEL_SOURCE') ?? env('MODEL_PATH');
  return c?.image && modelPath !== undefined ? { image: c.image, modelPath } : undefined;
}

/**
 * The revision the stable Deployment runs. Without a rollout, the spec's (a rolling update, as
 * always). With one, the revision already deployed stays until the spec's is promoted; a model with
 * no Deployment yet starts on the spec's, without a canary.
 */
export function stableRevisionFor(
  spec: Pick<MachineModelSpec, 'image' | 'modelPath' | 'storageUri' | 'sha256' | 'rollout'>,
  deployed: Revision | undefined,
  promoted: Revision | undefined,
): Revision {
  const wanted = revisionOf(spec);
  if (!spec.rollout || !deployed) return wanted;
  if (promoted && sameRevision(promoted, wanted)) return wanted;
  return deployed;
}

/** A short, stable name for a revision (FNV-1a over image and model path): it labels the canary and names its workflow. */
export function revisionName(r: Revision): string {
  let h = 0x811c9dc5;
  for (const ch of `${r.image}\n${r.modelPath}`) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

export const maxSteps = 10;
export const maxPauseSeconds = 24 * 3600;
const durationPattern = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/** Seconds in a duration written as Kubernetes users write them ("90s", "5m", "1h30m"); undefined when it does not parse. */
export function durationSeconds(d: string): number | undefined {
  const m = durationPattern.exec(d);
  if (!m || d === '') return undefined;
  const [, h = '0', min = '0', s = '0'] = m;
  return Number(h) * 3600 + Number(min) * 60 + Number(s);
}

/** A model's name leaves room for its canary's (`<name>-canary`) within a Service name's 63 characters. */
export const maxNameLengthWithRollout = 63 - '-canary'.length;

/** The same rules as the CRD's schema and CEL, for objects that reached the API without them. */
export function validateRollout(r: RolloutSpec | undefined, modelName: string): string[] {
  if (!r) return [];
  const errors: string[] = [];
  if (modelName.length > maxNameLengthWithRollout) {
    errors.push(
      `metadata.name must be at most ${maxNameLengthWithRollout} characters for a rollout (its canary's Service is named <name>-canary), got ${modelName.length}`,
    );
  }
  if (r.strategy !== 'Canary') errors.push(`rollout.strategy must be Canary, got ${JSON.stringify(r.strategy)}`);
  const steps = Array.isArray(r.steps) ? r.steps : [];
  if (steps.length === 0 || steps.length > maxSteps) {
    errors.push(`rollout.steps must have 1 to ${maxSteps} steps, got ${steps.length}`);
  }
  steps.forEach((step, i) => {
    if (!Number.isInteger(step.weight) || step.weight < 1 || step.weight > 99) {
      errors.push(`rollout.steps[${i}].weight must be a whole percent from 1 to 99, got ${step.weight}`);
    } else if (i > 0 && step.weight <= steps[i - 1]!.weight) {
      errors.push(`rollout.steps[${i}].weight must be greater than the step before it (${steps[i - 1]!.weight})`);
    }
    if (step.pause !== undefined) {
      const s = durationSeconds(step.pause);
      if (s === undefined || s > maxPauseSeconds) {
        errors.push(
          `rollout.steps[${i}].pause must be a duration such as 30s, 5m or 1h30m, at most 24h, got ${JSON.stringify(step.pause)}`,
        );
      }
    }
  });
  const a = r.analysis;
  if (a?.maxErrorRatePercent !== undefined && !(a.maxErrorRatePercent >= 0 && a.maxErrorRatePercent <= 100)) {
    errors.push(`rollout.analysis.maxErrorRatePercent must be from 0 to 100, got ${a.maxErrorRatePercent}`);
  }
  if (a?.minRequests !== undefined && !(Number.isInteger(a.minRequests) && a.minRequests >= 0)) {
    errors.push(`rollout.analysis.minRequests must be a whole number of at least 0, got ${a.minRequests}`);
  }
  if (r.onFailure !== undefined && r.onFailure !== 'Rollback' && r.onFailure !== 'Pause') {
    errors.push(`rollout.onFailure must be Rollback or Pause, got ${JSON.stringify(r.onFailure)}`);
  }
  return errors;
}

/** The canary's replicas during a step: its weight's share of the stable replicas, rounded up, at least one. */
export function canaryReplicas(stableReplicas: number, weight: number): number {
  return Math.max(1, Math.ceil((stableReplicas * weight) / 100));
}

/**
 * Why a canary request from a rollout's workflow disagrees with the live MachineModel, or undefined
 * when it agrees. Workflow inputs are not a trust boundary (anything that reaches Temporal can start
 * one), so the canary's revision must be the spec's, under a rollout plan: a forged rollout can run no
 * image the model's author did not ask for. Withdrawing the canary's share is always backed.
 */
export function canaryRequestRefusal(
  spec: Pick<MachineModelSpec, 'image' | 'modelPath' | 'storageUri' | 'sha256' | 'rollout'>,
  request: { revision?: Revision; weight?: number },
): string | undefined {
  if (request.weight === 0 && !request.revision) return undefined;
  if (!spec.rollout) return 'the MachineModel has no rollout plan';
  const { revision } = request;
  if (revision && !sameRevision(revision, revisionOf(spec)))
    return `revision ${revision.image} (${revision.modelPath}) is not the spec's ${spec.image} (${modelLocation(spec)})`;
  return undefined;
}

/**
 * The most a canary may have under the live spec: replicas within its bounds, a weight no higher
 * than its plan's highest step. A request above them is cut to them (a plan edited during a rollout
 * is not refused for good), so a forged one cannot take more than the author's plan gives.
 */
export function canaryCeiling(spec: Pick<MachineModelSpec, 'rollout' | 'replicas' | 'maxReplicas'>): {
  replicas: number;
  weight: number;
} {
  return {
    replicas: spec.replicas ?? spec.maxReplicas ?? 1,
    weight: Math.max(0, ...(spec.rollout?.steps ?? []).map((s) => s.weight)),
  };
}

/** The canary's requests and 5xx answers, as the gateway counts them. */
export interface TrafficSample {
  requests: number;
  errors: number;
  /**
   * When the gateway's counters last started from zero (Caddy's: its last config load). A reading
   * with another value counts from that moment, not from the reading before it.
   */
  countedSince?: number;
  /**
   * A gateway of several replicas, each counting its own share: the sample per replica (the totals
   * above are their sums). One replica's counters starting again loses none of the others'.
   */
  replicas?: Record<string, TrafficSample>;
}

/** The requests counted between two readings of one counter (`last` undefined: since it started). */
function counted(last: TrafficSample | undefined, now: TrafficSample): TrafficSample {
  const restarted = !last || now.countedSince !== last.countedSince || now.requests < last.requests;
  const from = restarted ? { requests: 0, errors: 0 } : last;
  return { requests: now.requests - from.requests, errors: Math.max(0, now.errors - from.errors) };
}

/**
 * A replica's admin URL as its scheme, host and port. Readings by 0.2.0 named replicas by the whole
 * URL (credentials and path too; later ones by this, to keep them out of histories), and a step under
 * way across the upgrade compares one of each. Both sides are reduced alike, so a recorded history
 * compares the same replicas as it did.
 */
function replicaOrigin(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)(?:[^/?#@]*@)?([^/?#]*).*$/i, '$1$2');
}

/**
 * The step's requests so far (`total`), with the gateway's counters read again (`now`) after the
 * reading before (`last`). Counters that started again from zero count from there: requests answered
 * between the last reading and that restart are not seen.
 */
export function addTraffic(total: TrafficSample, last: TrafficSample | undefined, now: TrafficSample): TrafficSample {
  const before = new Map(Object.entries(last?.replicas ?? {}).map(([replica, s]) => [replicaOrigin(replica), s]));
  const parts = now.replicas
    ? Object.entries(now.replicas).map(([replica, sample]) => counted(before.get(replicaOrigin(replica)), sample))
    : [counted(last, now)];
  return parts.reduce((sum, p) => ({ requests: sum.requests + p.requests, errors: sum.errors + p.errors }), {
    requests: total.requests,
    errors: total.errors,
  });
}

export interface CanaryHealth {
  readyReplicas: number;
  desiredReplicas: number;
  /** Why its containers do not become ready (container-troubles.ts). */
  trouble?: ContainerTrouble;
  /** Undefined when the gateway does not report the canary's answers. */
  traffic?: TrafficSample;
}

export type CanaryVerdict =
  /** Every check passed. */
  | { kind: 'healthy'; detail: string }
  /** Not ready yet, for no reason that needs a person (still loading): look again. */
  | { kind: 'waiting'; detail: string }
  /** Too few requests to judge the error rate: a person decides. */
  | { kind: 'inconclusive'; detail: string }
  | { kind: 'failed'; check: 'Ready' | 'ErrorRate'; message: string };

const percent = (x: number) => `${Math.round(x * 10) / 10}%`;

/**
 * The canary's verdict now. A canary that crashes, cannot pull its image or cannot start fails at
 * once. The error rate is judged over the step's requests, where the gateway reports them, as soon as
 * enough came, ready or not. Otherwise a canary not ready is waited for (never passed: at the end of
 * its step the rollout waits again, under the ready deadline); at the end of the step (`endOfStep`)
 * too few requests leave it to a person.
 */
export function judgeCanary(
  analysis: RolloutAnalysis | undefined,
  health: CanaryHealth,
  endOfStep: boolean,
): CanaryVerdict {
  const ready = `${health.readyReplicas} of ${health.desiredReplicas} ready`;
  if (health.trouble && needsAPerson(health.trouble)) {
    return { kind: 'failed', check: 'Ready', message: `canary not ready: ${describeTrouble(health.trouble)}` };
  }
  const max = analysis?.maxErrorRatePercent;
  const t = health.traffic;
  // Errors count whatever the readiness: a canary whose Pods turn unready answers its share with 502s.
  if (max !== undefined && t && t.requests > 0 && t.requests >= (analysis?.minRequests ?? 0)) {
    const rate = (t.errors / t.requests) * 100;
    if (rate > max) {
      const numbers = `${t.errors} of ${t.requests} requests answered 5xx (${percent(rate)}, at most ${max}%)`;
      return { kind: 'failed', check: 'ErrorRate', message: `canary error rate too high: ${numbers}` };
    }
  }
  if (health.readyReplicas < health.desiredReplicas) {
    const why = health.trouble ? `: ${describeTrouble(health.trouble)}` : '';
    return { kind: 'waiting', detail: `canary ${ready}${why}` };
  }
  if (max === undefined || (!endOfStep && !t)) return { kind: 'healthy', detail: `canary ${ready}` };
  if (!t) return { kind: 'healthy', detail: `canary ${ready}; the gateway does not report its error rate` };
  const min = analysis?.minRequests ?? 0;
  if (t.requests < min || t.requests === 0) {
    if (!endOfStep) return { kind: 'healthy', detail: `canary ${ready}` };
    return {
      kind: 'inconclusive',
      detail: `canary ${ready}; ${t.requests} requests in this step, fewer than the ${Math.max(min, 1)} needed to judge its error rate`,
    };
  }
  const rate = (t.errors / t.requests) * 100;
  const numbers = `${t.errors} of ${t.requests} requests answered 5xx (${percent(rate)}, at most ${max}%)`;
  return rate > max
    ? { kind: 'failed', check: 'ErrorRate', message: `canary error rate too high: ${numbers}` }
    : { kind: 'healthy', detail: `canary ${ready}; ${numbers}` };
}
