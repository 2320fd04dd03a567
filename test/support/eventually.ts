import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls until `probe` returns a value other than undefined or false (errors count as "not yet"),
 * and resolves with it; the one way the tests wait for what they assert.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
