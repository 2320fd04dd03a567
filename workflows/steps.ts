// How the MachineModel workflow calls its activities: retry options, a one-line summary per step for
// the Web UI, and the failure an activity hands back, in the vocabulary's terms.
import { RetryState } from '@temporalio/common';
import {
  ActivityFailure,
  ApplicationFailure,
  CancelledFailure,
  TemporalFailure,
  proxyActivities,
  proxyLocalActivities,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
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

/**
 * A Kubernetes step's first attempt, as a local activity: it runs inside the workflow task that asked
 * for it, so a round of a few steps is one workflow task and a marker per step instead of a trip
 * through the task queue and three events per step. One attempt only: a step that must be retried
 * goes on as a regular activity (see `kubeStep`), so the Web UI shows its attempts and last failure.
 */
export const kubeLocalStepOptions: LocalActivityOptions = {
  // Within the 10 s workflow task timeout: a step that hangs falls back before the task times out.
  startToCloseTimeout: '8 seconds',
  retry: { maximumAttempts: 1 },
};

const activities = proxyActivities<Activities>(kubeStepOptions);
const localActivities = proxyLocalActivities<Activities>(kubeLocalStepOptions);

type Step<K extends keyof Activities, O> = {
  executeWithOptions(options: O, args: Parameters<Activities[K]>): ReturnType<Activities[K]>;
};

/** Runs an activity with a one-line summary that the Web UI shows in the event history. */
export function step<K extends keyof Activities>(
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  return stepWith(kubeStepOptions, name, summary, ...args);
}

function stepWith<K extends keyof Activities>(
  options: ActivityOptions,
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  return (activities[name] as unknown as Step<K, ActivityOptions>).executeWithOptions({ ...options, summary }, args);
}

/**
 * A Kubernetes step tried once as a local activity, then, if that attempt failed in a way worth
 * retrying, as a regular activity with the step's retry policy. A terminal failure comes back at once.
 */
export function kubeStep<K extends keyof Activities>(
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  return localFirstWith(kubeStepOptions, name, summary, ...args);
}

/** As kubeStep, going on as a regular activity with `fallback`'s retry policy. */
export function localFirstWith<K extends keyof Activities>(
  fallback: ActivityOptions,
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  const local: Promise<unknown> = (
    localActivities[name] as unknown as Step<K, LocalActivityOptions>
  ).executeWithOptions({ ...kubeLocalStepOptions, summary }, args);
  return local.catch((thrown: unknown) => {
    const err = asActivityFailure(thrown, name);
    const failure = failureOf(err);
    if (!failure || failure.nonRetryable) throw err;
    return stepWith(fallback, name, `${summary} (retrying)`, ...args) as Promise<unknown>;
  }) as ReturnType<Activities[K]>;
}

/**
 * The SDK hands a local activity's failure to the workflow as the bare cause (an ApplicationFailure),
 * where a regular activity's comes wrapped in an ActivityFailure: wrap it, so both read alike.
 */
function asActivityFailure(err: unknown, activityType: string): unknown {
  if (err instanceof ActivityFailure || !(err instanceof TemporalFailure) || err instanceof CancelledFailure)
    return err;
  return new ActivityFailure(err.message, activityType, undefined, RetryState.MAXIMUM_ATTEMPTS_REACHED, undefined, err);
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
