// What the MachineModel's status should say, from what a reconcile round decided and observed. Pure.
import type { Condition, MachineModelStatus, Phase, RolloutStatus } from './api.js';
import { describeTrouble, needsAPerson, troubleReasons, type ContainerTrouble } from './container-troubles.js';
import type { Unschedulable } from './pod-scheduling.js';

/** What the workflow concluded this round. */
export type Verdict =
  | { kind: 'progressing' }
  | { kind: 'ready' }
  | { kind: 'deadline-exceeded'; deadlineSeconds: number }
  | { kind: 'failed'; reason: string; message: string }
  | { kind: 'deleting'; message: string };

/** The Deployment's rollout as observed. */
export interface Readiness {
  found: boolean;
  desiredReplicas: number;
  replicas: number;
  readyReplicas: number;
  availableReplicas: number;
  updatedReplicas: number;
  /** The Deployment controller has seen the latest spec. */
  observedLatest: boolean;
  available?: { status: Condition['status']; reason: string; message: string };
  /** Set when the rollout waits for the scheduler (e.g. no node has the GPUs asked for). */
  unschedulable?: Unschedulable;
  /** Set when containers do not become ready: an image pull, a crash loop, a probe (container-troubles.ts). */
  containers?: ContainerTrouble;
  /** The HorizontalPodAutoscaler's ScalingActive condition, when the model has an autoscaler. */
  autoscaler?: { scalingActive?: { status: Condition['status']; reason: string; message: string } };
}

export function isReady(r: Readiness | undefined): boolean {
  return (
    !!r &&
    r.found &&
    r.observedLatest &&
    r.updatedReplicas >= r.desiredReplicas &&
    r.readyReplicas >= r.desiredReplicas &&
    r.available?.status === 'True'
  );
}

export interface StatusInput {
  generation: number;
  verdict: Verdict;
  readiness?: Readiness;
  inferenceURL?: string;
  /** Where the gateway publishes the model; null when it does not (any more), undefined to keep what status says. */
  gatewayURL?: string | null;
  selector?: string;
  /** Extra conditions owned by other steps (e.g. GatewayRegistered), merged as given. */
  extraConditions?: Omit<Condition, 'lastTransitionTime'>[];
  /** The latest canary rollout, for status.rollout and the Progressing condition; undefined to keep what status says. */
  rollout?: RolloutStatus;
  now: string;
}

const rolloutRunning = (r: RolloutStatus | undefined) => r?.phase === 'Progressing' || r?.phase === 'Paused';

function rolloutLine(r: RolloutStatus): string {
  const where = r.step ? `step ${r.step} of ${r.steps}, canary ${r.weight}%` : 'starting';
  return `rollout of ${r.canary.image} (${r.canary.modelPath}): ${r.phase}, ${where}${r.message ? `; ${r.message}` : ''}`;
}

/** The Progressing condition of a model with a rollout: True while one runs, False with how the last ended. */
function progressingCondition(r: RolloutStatus): Omit<Condition, 'lastTransitionTime'> {
  const reasons: Record<RolloutStatus['phase'], string> = {
    Progressing: 'RolloutProgressing',
    Paused: 'RolloutPaused',
    Promoted: 'RolloutPromoted',
    RolledBack: 'RolloutRolledBack',
    Aborted: 'RolloutAborted',
  };
  return {
    type: 'Progressing',
    status: rolloutRunning(r) ? 'True' : 'False',
    reason: reasons[r.phase],
    message: rolloutLine(r),
  };
}

const phases: Record<Verdict['kind'], Phase> = {
  progressing: 'Deploying',
  ready: 'Ready',
  'deadline-exceeded': 'Failed',
  failed: 'Failed',
  deleting: 'Deleting',
};

/**
 * A rollout whose containers cannot run (an image that cannot be pulled, a crash loop) is Failed at
 * once, and one whose pods the scheduler cannot place is Pending: neither progresses by waiting alone.
 * Both recover by themselves when the spec or the cluster is fixed: the workflow keeps watching.
 */
export function phaseOf(v: Verdict, r: Readiness | undefined): Phase {
  if (v.kind !== 'progressing') return phases[v.kind];
  if (stuckContainers(r)) return 'Failed';
  return r?.unschedulable ? 'Pending' : 'Deploying';
}

function stuckContainers(r: Readiness | undefined): ContainerTrouble | undefined {
  return r?.containers && needsAPerson(r.containers) ? r.containers : undefined;
}

function replicaSummary(r: Readiness | undefined): string {
  if (!r?.found) return 'the Deployment does not exist yet';
  let summary = `${r.readyReplicas} of ${r.desiredReplicas} replicas ready, ${r.updatedReplicas} updated`;
  if (r.containers && !needsAPerson(r.containers)) summary += `; ${describeTrouble(r.containers)}`;
  if (!r.unschedulable) return summary;
  const pods = r.unschedulable.pods === 1 ? '1 pod' : `${r.unschedulable.pods} pods`;
  return `${summary}; ${pods} cannot be scheduled: ${r.unschedulable.message}`;
}

function readyCondition(v: Verdict, r: Readiness | undefined): Omit<Condition, 'lastTransitionTime'> {
  switch (v.kind) {
    case 'ready':
      return { type: 'Ready', status: 'True', reason: 'ModelReady', message: replicaSummary(r) };
    case 'progressing': {
      const stuck = stuckContainers(r);
      if (stuck)
        return {
          type: 'Ready',
          status: 'False',
          reason: troubleReasons[stuck.kind],
          message: `${describeTrouble(stuck)}; ${replicaSummary(r)}; will recover when the spec or the cluster is fixed`,
        };
      if (r?.unschedulable)
        return {
          type: 'Ready',
          status: 'False',
          reason: 'Unschedulable',
          message: `waiting for the scheduler: ${replicaSummary(r)}`,
        };
      const reason = r?.containers ? troubleReasons[r.containers.kind] : 'Progressing';
      return { type: 'Ready', status: 'False', reason, message: `rolling out: ${replicaSummary(r)}` };
    }
    case 'deadline-exceeded':
      return {
        type: 'Ready',
        status: 'False',
        reason: 'ProgressDeadlineExceeded',
        message: `not ready within ${v.deadlineSeconds}s: ${replicaSummary(r)}; still watching and will recover on its own`,
      };
    case 'failed':
      return { type: 'Ready', status: 'False', reason: v.reason, message: v.message };
    case 'deleting':
      return { type: 'Ready', status: 'False', reason: 'Deleting', message: v.message };
  }
}

/**
 * The Kubernetes API conventions' abnormal-true pair that generic tools read (kstatus, so Flux and kpt;
 * Argo CD): `Reconciling` while work is under way, `Stalled` when it cannot go on without a person (an
 * invalid spec, a name owned by someone else, the progress deadline). A Ready model has both False.
 */
function reconcilingAndStalled(
  v: Verdict,
  r: Readiness | undefined,
  ready: Omit<Condition, 'lastTransitionTime'>,
): Omit<Condition, 'lastTransitionTime'>[] {
  const no = (type: string, reason: string, message: string) => ({ type, status: 'False' as const, reason, message });
  const kind = v.kind === 'progressing' && stuckContainers(r) ? 'failed' : v.kind;
  switch (kind) {
    case 'ready':
      return [no('Reconciling', 'ModelReady', 'nothing to do'), no('Stalled', 'ModelReady', 'nothing to do')];
    case 'progressing':
    case 'deleting':
      return [
        { type: 'Reconciling', status: 'True', reason: ready.reason, message: ready.message },
        no('Stalled', ready.reason, 'progressing'),
      ];
    case 'deadline-exceeded':
    case 'failed':
      return [
        no('Reconciling', ready.reason, 'waiting for the spec or the cluster to change'),
        { type: 'Stalled', status: 'True', reason: ready.reason, message: ready.message },
      ];
  }
}

function availableCondition(r: Readiness | undefined): Omit<Condition, 'lastTransitionTime'> {
  if (!r?.found)
    return {
      type: 'Available',
      status: 'Unknown',
      reason: 'DeploymentNotFound',
      message: 'the Deployment does not exist yet',
    };
  if (!r.available)
    return {
      type: 'Available',
      status: 'Unknown',
      reason: 'NotReported',
      message: 'the Deployment reports no Available condition yet',
    };
  return { type: 'Available', status: r.available.status, reason: r.available.reason, message: r.available.message };
}

/**
 * Whether the autoscaler can act: an HPA without metrics (no metrics-server, say) keeps the model at
 * its minimum replicas, which the Ready condition alone would never tell.
 */
function autoscalingCondition(r: Readiness | undefined): Omit<Condition, 'lastTransitionTime'> | undefined {
  if (!r?.autoscaler) return undefined;
  const active = r.autoscaler.scalingActive;
  if (!active)
    return {
      type: 'Autoscaling',
      status: 'Unknown',
      reason: 'NotReported',
      message: 'the HorizontalPodAutoscaler has not evaluated its metrics yet',
    };
  if (active.status === 'True')
    return { type: 'Autoscaling', status: 'True', reason: active.reason, message: active.message };
  return {
    type: 'Autoscaling',
    status: active.status,
    reason: active.reason,
    message: `the autoscaler cannot scale: ${active.message}`,
  };
}

/** Sets a condition, keeping lastTransitionTime when its status did not change (metav1.Condition semantics). */
export function setCondition(
  conditions: Condition[],
  next: Omit<Condition, 'lastTransitionTime'>,
  now: string,
): Condition[] {
  const prev = conditions.find((c) => c.type === next.type);
  const lastTransitionTime = prev && prev.status === next.status ? prev.lastTransitionTime : now;
  const updated: Condition = { ...next, lastTransitionTime };
  return prev ? conditions.map((c) => (c.type === next.type ? updated : c)) : [...conditions, updated];
}

export function computeStatus(prev: MachineModelStatus | undefined, input: StatusInput): MachineModelStatus {
  let conditions = prev?.conditions ?? [];
  const autoscaling = autoscalingCondition(input.readiness);
  // Observed without an autoscaler: a condition about one would be stale.
  if (input.readiness?.found && !autoscaling) conditions = conditions.filter((c) => c.type !== 'Autoscaling');
  const ready = readyCondition(input.verdict, input.readiness);
  const rollout = input.rollout ?? prev?.rollout;
  // A rollout under way is work in progress for kstatus, while the stable revision serves (Ready).
  const reconciling =
    rolloutRunning(rollout) && input.verdict.kind === 'ready'
      ? [
          { type: 'Reconciling', status: 'True' as const, reason: 'RolloutInProgress', message: rolloutLine(rollout!) },
          { type: 'Stalled', status: 'False' as const, reason: 'RolloutInProgress', message: 'progressing' },
        ]
      : reconcilingAndStalled(input.verdict, input.readiness, ready);
  const wanted = [
    ready,
    ...reconciling,
    availableCondition(input.readiness),
    ...(autoscaling ? [autoscaling] : []),
    ...(input.extraConditions ?? []),
    ...(rollout ? [progressingCondition(rollout)] : []),
  ];
  for (const c of wanted)
    conditions = setCondition(conditions, { ...c, observedGeneration: input.generation }, input.now);
  const status: MachineModelStatus = {
    phase: phaseOf(input.verdict, input.readiness),
    replicas: input.readiness?.readyReplicas ?? 0,
    ...(input.readiness?.found ? { ready: `${input.readiness.readyReplicas}/${input.readiness.desiredReplicas}` } : {}),
    observedGeneration: input.generation,
    conditions,
  };
  if (input.inferenceURL) status.inferenceURL = input.inferenceURL;
  const gatewayURL = input.gatewayURL === undefined ? prev?.gatewayURL : input.gatewayURL;
  if (gatewayURL) status.gatewayURL = gatewayURL;
  if (input.selector) status.selector = input.selector;
  if (rollout) status.rollout = rollout;
  return status;
}

/** Whether writing `next` would change anything; avoids status writes (and the events they cause) when nothing differs. */
export function statusDiffers(prev: MachineModelStatus | undefined, next: MachineModelStatus): boolean {
  return JSON.stringify(normalize(prev ?? {})) !== JSON.stringify(normalize(next));
}

function normalize(s: MachineModelStatus): MachineModelStatus {
  const conditions = [...(s.conditions ?? [])]
    .sort((a, b) => a.type.localeCompare(b.type))
    .map((c) => ({
      type: c.type,
      status: c.status,
      reason: c.reason,
      message: c.message,
      lastTransitionTime: c.lastTransitionTime,
      observedGeneration: c.observedGeneration,
    }));
  return {
    phase: s.phase,
    inferenceURL: s.inferenceURL,
    gatewayURL: s.gatewayURL,
    replicas: s.replicas,
    ready: s.ready,
    selector: s.selector,
    observedGeneration: s.observedGeneration,
    conditions,
    rollout: s.rollout,
  };
}
