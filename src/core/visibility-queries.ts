// Temporal visibility queries the operator lists workflows by. Pure.

/** A string value in a visibility query. */
export const quote = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/** Every running workflow, of any type, on the queue. */
export function runningOnQueueQuery(queue: string): string {
  return `TaskQueue = ${quote(queue)} AND ExecutionStatus = 'Running'`;
}
