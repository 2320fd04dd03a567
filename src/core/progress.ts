// Rollout progress and how soon to look again. Pure and deterministic: the workflow passes its own clock.
import type { Verdict } from './status.js';

export interface ProgressState {
  /** When the current rollout began (ms); unset while Ready. */
  progressStartedAt?: number;
  notReadyChecks: number;
}

export interface ProgressConfig {
  progressDeadlineSeconds: number;
  driftCheckSeconds: number;
  readinessRecheckSeconds: { initial: number; max: number };
}

export interface ProgressDecision extends ProgressState {
  verdict: Extract<Verdict, { kind: 'ready' | 'progressing' | 'deadline-exceeded' }>;
  /** Look again after this long unless a signal comes first. */
  nextCheckSeconds: number;
}

export function decideProgress(
  prev: ProgressState,
  ready: boolean,
  nowMs: number,
  cfg: ProgressConfig,
): ProgressDecision {
  if (ready) return { verdict: { kind: 'ready' }, notReadyChecks: 0, nextCheckSeconds: cfg.driftCheckSeconds };
  const progressStartedAt = prev.progressStartedAt ?? nowMs;
  const notReadyChecks = prev.notReadyChecks + 1;
  const backoff = Math.min(
    cfg.readinessRecheckSeconds.initial * 2 ** (notReadyChecks - 1),
    cfg.readinessRecheckSeconds.max,
  );
  const deadlineAt = progressStartedAt + cfg.progressDeadlineSeconds * 1000;
  if (nowMs >= deadlineAt) {
    return {
      verdict: { kind: 'deadline-exceeded', deadlineSeconds: cfg.progressDeadlineSeconds },
      progressStartedAt,
      notReadyChecks,
      nextCheckSeconds: cfg.readinessRecheckSeconds.max,
    };
  }
  // Never sleep past the deadline: the Failed condition should appear when it passes.
  const untilDeadline = Math.max(1, Math.ceil((deadlineAt - nowMs) / 1000));
  return {
    verdict: { kind: 'progressing' },
    progressStartedAt,
    notReadyChecks,
    nextCheckSeconds: Math.min(backoff, untilDeadline),
  };
}

/** What the workflow carries of the object it follows and of that object's rollout. */
export interface FollowedProgress extends ProgressState {
  uid?: string;
  lastGeneration?: number;
}

/**
 * The rollout progress a round starts from once it has read the object: its own for the object and
 * generation the workflow followed, from nothing for a new object of the name or a new generation.
 */
export function progressOnSight(followed: FollowedProgress, seen: { uid: string; generation: number }): ProgressState {
  if (followed.uid !== seen.uid || followed.lastGeneration !== seen.generation) return { notReadyChecks: 0 };
  return { progressStartedAt: followed.progressStartedAt, notReadyChecks: followed.notReadyChecks };
}

/**
 * Whether the round's model is progressing, Ready or past its deadline, and when to look again: the
 * one progress decision of a round, made by the workflow's round, or by its read step when that step
 * writes the status too (activities/read-and-apply.ts).
 */
export function progressOfRound(
  followed: FollowedProgress,
  seen: { uid: string; generation: number },
  ready: boolean,
  nowMs: number,
  cfg: ProgressConfig,
): ProgressDecision {
  return decideProgress(progressOnSight(followed, seen), ready, nowMs, cfg);
}
