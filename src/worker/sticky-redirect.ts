// A worker that takes a queue after a restart (or a shard from another replica) sends that queue's
// running workflows' next tasks to itself at once. Each run still names the sticky queue of the worker
// that had it cached; for 10 s after that worker last polled, the server sends the run's tasks (a
// timer, a signal, a rollout's report) there, and they wait out the sticky queue's schedule-to-start
// timeout before they come back to the queue: every in-flight rollout lost those seconds at each
// restart (issue 59's baseline in bench/journal.md). ResetStickyTaskQueue clears the run's sticky queue,
// so its next task goes to the queue itself, where this worker takes it and replays the run, as it
// would have after the timeout. A run cached by a live replica loses its cache once (one replay).
import type { NativeConnection } from '@temporalio/worker';
import type { Logger } from 'pino';
import { runningOnQueueQuery } from '../core/visibility-queries.js';

/** Resets at once: a few RPCs each, against a Temporal that answers a restarted operator's burst. */
const concurrency = 8;
/**
 * The server stops sending tasks to a sticky queue nobody polled for 10 s; a reset after that only
 * costs the run its place in this worker's cache (a replay).
 */
const usefulForMs = 10_000;

/** Resets the stickiness of every running workflow on `taskQueue` (for 10 s at most); how many it reset. */
export async function redirectStickyRuns(
  connection: NativeConnection,
  namespace: string,
  taskQueue: string,
  log: Logger,
): Promise<number> {
  const service = connection.workflowService;
  const query = runningOnQueueQuery(taskQueue);
  const deadline = Date.now() + usefulForMs;
  let reset = 0;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await connection.withDeadline(deadline, () =>
      service.listWorkflowExecutions({ namespace, query, pageSize: 1000, nextPageToken }),
    );
    const executions = (page.executions ?? []).flatMap((e) => (e.execution ? [e.execution] : []));
    for (let i = 0; i < executions.length && Date.now() < deadline; i += concurrency) {
      const batch = executions.slice(i, i + concurrency);
      const results = await Promise.allSettled(
        batch.map((execution) =>
          connection.withDeadline(deadline, () => service.resetStickyTaskQueue({ namespace, execution })),
        ),
      );
      reset += results.filter((r) => r.status === 'fulfilled').length;
      // A run that closed since the list has nothing to reset; anything else is worth a line.
      for (const r of results)
        if (r.status === 'rejected' && !/not found|already completed/i.test(String(r.reason)))
          log.warn({ err: String(r.reason), taskQueue }, "could not send a run's tasks to its queue");
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken && Date.now() < deadline);
  return reset;
}
