// How often and how long a model's reconcile loop looks: deadlines, drift checks, the rate limit. Pure data.

export interface WorkflowConfig {
  /** Not Ready this long after a change -> phase Failed with reason ProgressDeadlineExceeded. */
  progressDeadlineSeconds: number;
  /**
   * How often an idle model is checked for drift without any event, give or take a tenth (each model
   * its own share, so that models started together do not all look at once). A safety net only: the
   * watches wake a model within a second of a change, and the gateway janitor of a missing route.
   */
  driftCheckSeconds: number;
  /** First and largest wait between readiness checks while a rollout progresses. */
  readinessRecheckSeconds: { initial: number; max: number };
  /** Continue-as-new after this many rounds, whatever the server suggests earlier. */
  maxRoundsPerRun: number;
  /** Rounds start at least this far apart, so a burst of changes costs a few rounds, not one each. */
  minRoundIntervalMs: number;
}

export const defaultWorkflowConfig: WorkflowConfig = {
  progressDeadlineSeconds: 600,
  // controller-runtime's SyncPeriod default: an idle model costs nothing in between.
  driftCheckSeconds: 36_000,
  readinessRecheckSeconds: { initial: 2, max: 60 },
  maxRoundsPerRun: 100,
  minRoundIntervalMs: 1000,
};

/**
 * The drift check's period for one model: `seconds` moved by up to a tenth either way, the same for
 * every run of that model's workflow (FNV-1a of its key: workflow code may not use crypto).
 */
export function jitteredSeconds(seconds: number, key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return Math.round(seconds * (0.9 + (hash / 0x1_0000_0000) * 0.2));
}
