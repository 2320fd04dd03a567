// The canary rollout workflow's contract: its input and result, the updates people send it (mmctl
// rollout, the Web UI) and the view it answers with. Workflow-safe.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { ModelRef, RolloutSpec } from '../src/core/api.js';
import type { Revision } from '../src/core/rollout.js';
import type { CanaryWant } from '../src/core/canary-state.js';
import type { MachineState } from '../src/core/rollout-machine.js';
import type { ReportSender } from '../src/core/rollout-reports.js';

export const rolloutWorkflowType = 'canaryRolloutWorkflow';

/** One rollout per model and revision: a new revision is a new workflow. */
export function rolloutWorkflowId(model: Pick<ModelRef, 'namespace' | 'name'>, revisionName: string): string {
  return `machinemodel/${model.namespace}/${model.name}/rollout/${revisionName}`;
}

export interface CanaryRolloutInput {
  ref: ModelRef;
  /** The new revision, which the canary runs. */
  revision: Revision;
  /** The revision the stable Deployment runs, which takes all traffic back on a rollback. */
  stable: Revision;
  plan: RolloutSpec;
  /** The stable Deployment's replicas when the rollout began: the canary's size follows from each step's weight. */
  stableReplicas: number;
  /** How often a pause looks at the canary's health (a crash fails the step at once, not at its end). */
  checkSeconds?: number;
  /** How long a canary may take to become ready in a step: the model's progress deadline (600 s by default). */
  readyDeadlineSeconds?: number;
  /** Where an earlier run of this rollout continued as new: its state, the rollout's start, its last ask. */
  resumed?: { state: MachineState; startedAt: number; want?: CanaryWant };
}

export type RolloutPhase = 'Progressing' | 'Paused' | 'Promoted' | 'RolledBack' | 'Aborted';

/** What `mmctl rollout status` shows, and every update answers with. */
export interface RolloutView {
  revision: Revision;
  stable: Revision;
  phase: RolloutPhase;
  /** 1-based; 0 before the first step. */
  step: number;
  steps: number;
  /** Percent of requests the canary serves now. */
  weight: number;
  /** Who holds a paused rollout: a person (pause), or an analysis that asks one (onFailure: Pause, too few requests). */
  pausedBy?: 'person' | 'analysis';
  /** Seconds left in the current step's pause as of the rollout's last step; frozen while paused. */
  pauseSecondsLeft?: number;
  /** When the running pause ends (ISO time): a reader counts the time left from its own clock. */
  pauseEndsAt?: string;
  /** The last verdicts, newest last: "step 1 (10%): canary 1 of 1 ready; 0 of 120 requests answered 5xx (0%, at most 5%)". */
  verdicts: string[];
  message?: string;
}

/** What the model's workflow keeps of its latest rollout, across continue-as-new. */
export interface RolloutState {
  workflowId: string;
  /**
   * The rollout's first run: only its reports count (src/core/rollout-reports.ts). Null while the
   * start is in flight or for a rollout followed after a reset; absent in records of 0.2.0.
   */
  runId?: string | null;
  /** Cancelled because the spec turned invalid: the same revision's rollout starts again once it is valid. */
  restartable?: boolean;
  /** The canary was removed because the spec turned invalid: nothing more to withdraw. */
  canaryWithdrawn?: boolean;
  revision: Revision;
  stable: Revision;
  running: boolean;
  /** The plan and the stable replicas the rollout started with: the round's share follows from them. */
  plan?: RolloutSpec;
  stableReplicas?: number;
  /** What the rollout last asked of the model's round, and the last ask the round answered. */
  want?: CanaryWant;
  answered?: number;
  view?: RolloutView;
  result?: Pick<RolloutResult, 'outcome' | 'check' | 'message'>;
}

/** How a rollout ended; the model's workflow acts on it (a promoted revision becomes stable). */
export interface RolloutResult {
  outcome: 'Promoted' | 'RolledBack' | 'Aborted';
  revision: Revision;
  /** For a rollback: which check failed, with its numbers. */
  check?: 'Ready' | 'ErrorRate';
  message: string;
  view: RolloutView;
}

export interface RolloutCommand {
  /** Who asked, for the story ("mmctl", "web-ui", a user name). */
  by?: string;
}

export const rolloutStateQuery = defineQuery<RolloutView>('rolloutState');
/** Skip the remaining steps and pauses: the canary's revision becomes stable. */
export const promoteUpdate = defineUpdate<RolloutView, [RolloutCommand]>('promote');
/** Stop: all traffic back to the stable revision, the canary removed; the rollout ends Aborted. */
export const abortUpdate = defineUpdate<RolloutView, [RolloutCommand]>('abort');
/** Hold the current step (its pause's time left frozen) until resumed. */
export const pauseUpdate = defineUpdate<RolloutView, [RolloutCommand]>('pause');
/** Go on from where it was paused: the same step, the time that was left. */
export const resumeUpdate = defineUpdate<RolloutView, [RolloutCommand]>('resume');

/**
 * From a rollout to its model's workflow: which rollout run sends it, how it stands (each step, pause,
 * resume), what it asks of the model's round (the canary's size and share), and at the end how it ended.
 */
export interface RolloutReport {
  /** Absent in reports of 0.2.0's rollouts. */
  from?: ReportSender;
  view: RolloutView;
  want?: CanaryWant;
  result?: RolloutResult;
}
export const rolloutReportSignal = defineSignal<[RolloutReport]>('rolloutReport');

/** From the model's round to its rollout: the ask it answered, and the canary's share as the round set it. */
export const canaryAnsweredSignal = defineSignal<[{ seq: number; weight: number }]>('canaryAnswered');
