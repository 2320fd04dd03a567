import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { StackInfo } from '../../tools/local-stack/stack.js';

const mmctlScript = fileURLToPath(new URL('../../dist/src/mmctl.js', import.meta.url));

/** mmctl as a person runs it (compiled), against the stack's Temporal and the operator's task queue. */
export function mmctlFor(stack: StackInfo, taskQueue: string) {
  return (...args: string[]) =>
    execFileSync(process.execPath, [mmctlScript, ...args], {
      env: { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress, MMO_TASK_QUEUE: taskQueue },
      encoding: 'utf8',
    });
}
