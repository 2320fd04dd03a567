import { CancelledFailure, Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

/**
 * Each task queue's worker stop. A worker that stops cancels its regular activities only after its
 * grace time and its local activities not at all, and the shard's next owner may write the same
 * objects as soon as the worker is down: so a stopping shard worker ends every activity it started,
 * at once, through this. A worker started later on the queue gets a stop of its own.
 */
const stops = new Map<string, AbortController>();

function stopOf(taskQueue: string): AbortController {
  const stop = stops.get(taskQueue) ?? new AbortController();
  stops.set(taskQueue, stop);
  return stop;
}

/**
 * Each activity's cancellation joined with the stop of the worker it started under, made once as it
 * starts (not at each request): a later worker on the queue does not un-stop it.
 */
const endOf = new WeakMap<Context, AbortSignal>();

/** The worker's activity interceptor that ties each activity to the stop of the worker running it. */
export const tiedToWorkerStop: ActivityInterceptorsFactory = (ctx) => {
  endOf.set(ctx, AbortSignal.any([ctx.cancellationSignal, stopOf(ctx.info.taskQueue).signal]));
  return {};
};

/** Ends the activities of the queue's worker, regular and local, and refuses their further requests. */
export function stopActivitiesOn(taskQueue: string): void {
  stopOf(taskQueue).abort(new CancelledFailure('WORKER_SHUTDOWN'));
}

/** A new worker on the queue (the shard taken back): the activities it starts may run. */
export function resumeActivitiesOn(taskQueue: string): void {
  if (stops.get(taskQueue)?.signal.aborted) stops.delete(taskQueue);
}

/**
 * The running activity's cancellation, or its worker's stop, whichever comes first; undefined outside
 * an activity. Its Kubernetes and gateway requests end with it, so a shard's previous owner writes
 * nothing once its worker is stopping.
 */
export function activityCancellation(): AbortSignal | undefined {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return undefined;
  }
  return endOf.get(context) ?? context.cancellationSignal;
}
