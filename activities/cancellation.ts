import { CancelledFailure, Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

/**
 * Each activity's cancellation joined with the stop of the worker it started under, made once as it
 * starts (not at each request).
 */
const endOf = new WeakMap<Context, AbortSignal>();

/**
 * One worker's stop. A worker that stops cancels its regular activities only after its grace time and
 * its local activities not at all, and the shard's next owner may write the same objects as soon as the
 * worker is down: so a stopping shard worker ends every activity it started, at once, through this.
 * Each worker has its own: a worker started on the same queue while the old one drains (the shard taken
 * back) neither un-stops the old one's activities nor inherits its stop.
 */
export class WorkerStop {
  private readonly controller = new AbortController();

  /** The worker's activity interceptor that ties each activity it starts to this stop. */
  readonly interceptor: ActivityInterceptorsFactory = (ctx) => {
    endOf.set(ctx, AbortSignal.any([ctx.cancellationSignal, this.controller.signal]));
    return {};
  };

  /** Ends the worker's activities, regular and local, and refuses their further requests. */
  stop(): void {
    this.controller.abort(new CancelledFailure('WORKER_SHUTDOWN'));
  }
}

/**
 * The running activity's cancellation, or its worker's stop, whichever comes first; undefined outside
 * an activity. Its Kubernetes and gateway requests end with it: one not yet sent is refused, one under
 * way is abandoned (a write already received by the server may still take effect).
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
