import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { cacheRoot, temporalTestServer } from '../../deploy/local/components.js';
import { ensureInstalled } from '../../deploy/local/install.js';
import { down, up, type StackInfo } from '../../deploy/local/stack.js';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackInfo;
    timeSkippingServer: string;
  }
}

/** One real stack for the whole run, on free ports and fresh data, stopped at the end. */
export default async function setup(project: TestProject) {
  const stateDir = process.env.MMO_TEST_STACK_DIR ?? path.join(cacheRoot, 'stack-test');
  const stack = await up({ stateDir, ports: 'auto', fresh: true });
  project.provide('stack', stack);
  project.provide('timeSkippingServer', await ensureInstalled(temporalTestServer));
  return async () => {
    await down(stateDir);
  };
}
