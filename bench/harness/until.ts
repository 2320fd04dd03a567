// Polls `check` every `everyMs` until it holds; the seconds it took, or an error naming `what` past `timeoutMs`.
import { setTimeout as sleep } from 'node:timers/promises';

export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 2_000,
): Promise<number> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000}s`);
    await sleep(everyMs);
  }
  return (performance.now() - started) / 1000;
}
