// How the MachineModel workflow calls its activities: retry options, a one-line summary per step for
// the Web UI, and the failure an activity hands back, in the vocabulary's terms.
import { ActivityFailure, ApplicationFailure, proxyActivities, type ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { StepFailure } from '../src/core/failures.js';

/**
 * Kubernetes steps: retryable failures are retried without limit (the round waits and the Web UI
 * shows the attempts); terminal ones come back at once (the activity marks them non-retryable).
 */
export const kubeStepOptions: ActivityOptions = {
  // Each activity is one or a few API calls; a short limit lets a crashed worker's tasks move on quickly.
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
};

/**
 * Gateway steps: a gateway outage must not hold a round, so a few quick attempts, then the workflow
 * says so in a condition and retries on its own timer.
 */
export const gatewayStepOptions: ActivityOptions = {
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '4 seconds', maximumAttempts: 3 },
};

const activities = proxyActivities<Activities>(kubeStepOptions);

type Step<K extends keyof Activities> = {
  executeWithOptions(options: ActivityOptions, args: Parameters<Activities[K]>): ReturnType<Activities[K]>;
};

/** Runs an activity with a one-line summary that the Web UI shows in the event history. */
export function step<K extends keyof Activities>(
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  return stepWith(kubeStepOptions, name, summary, ...args);
}

export function stepWith<K extends keyof Activities>(
  options: ActivityOptions,
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  return (activities[name] as unknown as Step<K>).executeWithOptions({ ...options, summary }, args);
}

/** The failure of an activity, as the error policy reads it; undefined for anything else (rethrow it). */
export function failureOf(err: unknown): StepFailure | undefined {
  if (!(err instanceof ActivityFailure)) return undefined;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) {
    return { type: cause.type ?? undefined, message: cause.message, nonRetryable: cause.nonRetryable ?? undefined };
  }
  // A timeout or cancellation after the retry policy gave up: retryable by nature.
  return { message: cause?.message ?? err.message };
}
