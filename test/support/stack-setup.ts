import { readdirSync } from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { cacheRoot } from '../../tools/local-stack/components.js';
import { down, up, type StackInfo } from '../../tools/local-stack/stack.js';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
  }
}

const prefix = 'stack-test-';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

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
    if (entry.startsWith(prefix) && Number.isInteger(pid) && !alive(pid)) await down(path.join(cacheRoot, entry), true);
  }
}

/**
 * One real stack for the whole run, on free ports, in a directory of its own (so that concurrent
 * runs never share or stop each other's servers), stopped and deleted at the end.
 */
export default async function setup(project: TestProject) {
  await sweepAbandoned();
  const stateDir = process.env.MMO_TEST_STACK_DIR ?? path.join(cacheRoot, `${prefix}${process.pid}`);
  const stack = await up({ stateDir, ports: 'auto', fresh: true });
  project.provide('stack', stack);
  return async () => {
    await down(stateDir, !process.env.MMO_TEST_STACK_DIR);
  };
}
