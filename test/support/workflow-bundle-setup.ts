import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { workflowBundleOptions } from '../../src/process/workflow-bundle.js';

declare module 'vitest' {
  export interface ProvidedContext {
    workflowBundleCode: string;
  }
}

/**
 * The workflow code, bundled once for the fast tier's workflow tests and replays (webpack takes a
 * second or more a bundle: once per file and per replayed history before).
 */
export default async function setup(project: TestProject) {
  const { code } = await bundleWorkflowCode({
    ...workflowBundleOptions(),
    // The workflows, and the stand-in for the model's workflow that the rollout's own tests use.
    workflowsPath: fileURLToPath(new URL('../fixtures/test-workflows.ts', import.meta.url)),
    logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
  });
  project.provide('workflowBundleCode', code);
}
