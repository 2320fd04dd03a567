import { Context } from '@temporalio/activity';

/**
 * The running activity's cancellation, or undefined outside an activity. A worker that stops (its
 * replica gave the shard up) cancels its activities, and the shard's next owner may write the same
 * objects once the worker is down: a request still under way then would be a second writer.
 */
export function activityCancellation(): AbortSignal | undefined {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return undefined;
  }
}
