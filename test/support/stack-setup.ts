import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import {
  binaryPath,
  cacheRoot,
  objectStore,
  temporalServer,
  type Component,
} from '../../tools/local-stack/components.js';
import { ensureInstalled } from '../../tools/local-stack/install.js';
import { ComponentFailure, pidAlive } from '../../tools/local-stack/processes.js';
import { down, up, type StackInfo } from '../../tools/local-stack/stack.js';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

const prefix = 'stack-test-';

/** Stacks of earlier test runs that were killed before their teardown: stop them and delete their data. */
async function sweepAbandoned(): Promise<void> {
  let entries: string[] = [];
  try {
    entries = readdirSync(cacheRoot);
  } catch {
    return;
  }
  for (const entry of entries) {
    const pid = Number(entry.slice(prefix.length));
    if (entry.startsWith(prefix) && Number.isInteger(pid) && !pidAlive(pid))
      await down(path.join(cacheRoot, entry), true);
  }
}

/**
 * Free ports are chosen before the servers bind them: another process may take one meanwhile (seen
 * once: Temporal's HTTP port, "address already in use"). `up` then stops what it started; a second
 * start chooses other ports.
 */
async function upRetryingPortRace(start: () => Promise<StackInfo>): Promise<StackInfo> {
  try {
    return await start();
  } catch (err) {
    if (!(err instanceof ComponentFailure) || !err.message.includes('address already in use')) throw err;
    console.error(`the stack lost a port to another process; starting it again: ${err.message.split('\n')[0]}`);
    return start();
  }
}

/**
 * One real stack for the whole run, on free ports, in a directory of its own (so that concurrent
 * runs never share or stop each other's servers), stopped and deleted at the end.
 */
export default async function setup(project: TestProject) {
  await sweepAbandoned();
  const stateDir = process.env.MMO_TEST_STACK_DIR ?? path.join(cacheRoot, `${prefix}${process.pid}`);
  const stack = await upRetryingPortRace(() => up({ stateDir, ports: 'auto', fresh: true, objectStore: false }));
  // Where the real node can run (Linux, root: .ci/run sets this there), its tests must not be skipped.
  if (process.env.MMO_REQUIRE_REAL_NODE === '1' && !stack.realNode) {
    await down(stateDir, !process.env.MMO_TEST_STACK_DIR);
    throw new Error(
      `MMO_REQUIRE_REAL_NODE=1, and the stack has no real node (${stack.simulatedOnly ?? 'none started'}): ` +
        "the real node's tests would be skipped. Free it (npm run stack:down) or unset MMO_REQUIRE_REAL_NODE.",
    );
  }
  project.provide('stack', stack);
  const prebuild = prebuildSlowComponents();
  return async () => {
    prebuild.abort();
    await down(stateDir, !process.env.MMO_TEST_STACK_DIR);
  };
}

/** The files that need a component whose first build takes many minutes, and that component. */
const slowBuilds: [string, Component][] = [
  ['test/e2e/model-storage.test.ts', objectStore],
  ['test/integration/model-cache-plugin.test.ts', objectStore],
  ['test/integration/temporal-postgres.test.ts', temporalServer],
];

/** The file filters vitest was started with (`vitest run [--project p] [filters…]`). */
function fileFilters(): string[] {
  const args = process.argv.slice(2);
  return args.filter((a, i) => !a.startsWith('-') && a !== 'run' && !args[i - 1]?.startsWith('--project'));
}

/**
 * On a fresh machine the object store (SeaweedFS) and the PostgreSQL smoke's Temporal server are Go
 * builds of many minutes. Built one after the other at the lowest CPU priority while the earlier test
 * files run (they mostly wait on the cluster), they are ready or nearly so when a file needs them,
 * which waits for this build instead of starting its own.
 */
function prebuildSlowComponents(): AbortController {
  const abort = new AbortController();
  const filters = fileFilters();
  const needed = slowBuilds
    .filter(([file]) => filters.length === 0 || filters.some((f) => file.includes(f)))
    .map(([, c]) => c)
    .filter((c) => !existsSync(binaryPath(c)));
  void (async () => {
    for (const c of needed)
      await ensureInstalled(c, (line) => console.error(`[prebuild] ${line}`), {
        background: true,
        signal: abort.signal,
      });
  })().catch((err: unknown) => {
    if (!abort.signal.aborted) console.error(`[prebuild] ${String(err)}; the test that needs it builds it itself`);
  });
  return abort;
}
