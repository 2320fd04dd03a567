// How often and how long a model's reconcile loop looks: deadlines, drift checks, the rate limit. Pure data.

export interface WorkflowConfig {
  /** Not Ready this long after a change -> phase Failed with reason ProgressDeadlineExceeded. */
  progressDeadlineSeconds: number;
  /** How often an idle model is checked for drift without any event. */
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
  driftCheckSeconds: 600,
  readinessRecheckSeconds: { initial: 2, max: 60 },
  maxRoundsPerRun: 100,
  minRoundIntervalMs: 1000,
};
