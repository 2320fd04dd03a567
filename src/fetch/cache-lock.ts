// One fetcher per artifact per node: two Pods of a model starting on one node share the cache, so the
// second waits for the first's artifact instead of fetching it too. The lock is a folder holding its
// owner's token, made elsewhere and renamed into place (atomic: one of two fetchers wins). Its holder
// refreshes its time; a holder killed without letting go leaves a lock that turns stale, and the next
// fetcher takes it over (renamed away, so two that find it stale cannot both take it) and resumes the
// part it left. A holder checks that the lock is still its own before it names the artifact.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface CacheLock {
  /** The lock is still this fetcher's: no other took it over as stale. */
  stillMine(): Promise<boolean>;
  release(): Promise<void>;
}

export interface LockOptions {
  /** A lock not refreshed for this long belongs to a fetcher that is gone. */
  staleMs: number;
  /** Checked while waiting: the artifact the holder fetched is there, so nothing is left to do. */
  done: () => Promise<boolean>;
  log: (line: Record<string, unknown>) => void;
}

const ownerOf = (lock: string) => readFile(path.join(lock, 'owner'), 'utf8').catch(() => undefined);
const code = (err: unknown) => (err as NodeJS.ErrnoException).code ?? '';

/** Takes the lock, or returns undefined once another fetcher has finished the artifact. */
export async function takeLock(lock: string, o: LockOptions): Promise<CacheLock | undefined> {
  const token = randomBytes(12).toString('hex');
  let waiting = false;
  for (;;) {
    if (await o.done()) return undefined;
    const mine = `${lock}.${token}`;
    await mkdir(mine, { recursive: true });
    await writeFile(path.join(mine, 'owner'), token);
    try {
      await rename(mine, lock);
      break;
    } catch (err) {
      await rm(mine, { recursive: true, force: true });
      if (!['EEXIST', 'ENOTEMPTY'].includes(code(err))) throw err;
    }
    const seen = await stat(lock).then(
      (s) => ({ age: Date.now() - s.mtimeMs }),
      () => undefined,
    );
    if (seen && seen.age > o.staleMs) {
      const owner = await ownerOf(lock);
      const grave = `${lock}.stale.${token}`;
      // Renamed away rather than deleted: of two fetchers that found it stale, one moves it.
      const moved = await rename(lock, grave).then(
        () => true,
        () => false,
      );
      if (moved && (await ownerOf(grave)) !== owner) {
        // Moved a lock taken meanwhile by a third fetcher: give it back, it is live.
        await rename(grave, lock).catch(() => undefined);
      } else if (moved) {
        o.log({ msg: 'taking over a lock its holder left', ageSeconds: Math.round(seen.age / 1000) });
        await rm(grave, { recursive: true, force: true });
      }
      continue;
    }
    if (!waiting) o.log({ msg: 'another fetcher on this node is fetching the artifact; waiting for it' });
    waiting = true;
    await sleep(1_000);
  }
  const stillMine = async () => (await ownerOf(lock)) === token;
  const beat = setInterval(() => {
    void stillMine().then((ours) => {
      if (!ours) return;
      const now = new Date();
      return utimes(lock, now, now);
    });
  }, o.staleMs / 4);
  return {
    stillMine,
    async release() {
      clearInterval(beat);
      if (await stillMine()) await rm(lock, { recursive: true, force: true });
    },
  };
}
