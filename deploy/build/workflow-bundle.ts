// Bundles the workflow code ahead of time (npm run build), so the worker loads dist/workflow-bundle.js
// instead of running webpack at every start.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowBundleOptions } from '../../src/process/workflow-bundle.js';

const out = fileURLToPath(new URL('../../dist/workflow-bundle.js', import.meta.url));
const { code } = await bundleWorkflowCode({
  ...workflowBundleOptions(),
  logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
});
writeFileSync(out, code);
console.error(`workflow bundle: ${out} (${Math.round(code.length / 1024)} KiB)`);
