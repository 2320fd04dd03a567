// One fetcher per artifact per node: two Pods of a model starting on one node share the cache, so the
// second waits for the first's artifact instead of fetching it too. The lock is a folder (mkdir is
// atomic) whose time its holder refreshes; a holder killed without letting go leaves a lock that
// turns stale, and the next fetcher takes it over and resumes the part it left.
import { mkdir, rm, stat, utimes } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

export interface CacheLock {
  release(): Promise<void>;
}

export interface LockOptions {
  /** A lock not refreshed for this long belongs to a fetcher that is gone. */
  staleMs: number;
  /** Checked while waiting: the artifact the holder fetched is there, so nothing is left to do. */
  done: () => Promise<boolean>;
  log: (line: Record<string, unknown>) => void;
}

/** Takes the lock, or returns undefined once another fetcher has finished the artifact. */
export async function takeLock(path: string, o: LockOptions): Promise<CacheLock | undefined> {
  let waiting = false;
  for (;;) {
    if (await o.done()) return undefined;
    try {
      await mkdir(path);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const age = await stat(path).then(
      (s) => Date.now() - s.mtimeMs,
      () => 0,
    );
    if (age > o.staleMs) {
      o.log({ msg: 'taking over a lock its holder left', ageSeconds: Math.round(age / 1000) });
      await rm(path, { recursive: true, force: true });
      continue;
    }
    if (!waiting) o.log({ msg: 'another fetcher on this node is fetching the artifact; waiting for it' });
    waiting = true;
    await sleep(1_000);
  }
  const beat = setInterval(() => {
    const now = new Date();
    utimes(path, now, now).catch(() => undefined);
  }, o.staleMs / 4);
  return {
    async release() {
      clearInterval(beat);
      await rm(path, { recursive: true, force: true });
    },
  };
}
