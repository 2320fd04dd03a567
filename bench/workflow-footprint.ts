// What one workflow costs the worker to create and to keep in its cache, before it has run a step:
// the heap it holds and the CPU its creation takes, in one reusable V8 context as the worker runs
// it, with the modules the build shares (src/process/workflow-bundle.ts) and without. Every start,
// and every task of a workflow the cache no longer holds, creates one.
// Usage: npm run bench:footprint -- [--workflows 300]
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
// Not exported from the package root; the SDK version is pinned. Read only, nothing patched.
import { ReusableVMWorkflowCreator } from '@temporalio/worker/lib/workflow/reusable-vm.js';
import { Command, Option } from 'commander';
import { wholeNumber } from '../src/process/flags.js';
import { workflowBundleOptions } from '../src/process/workflow-bundle.js';

const cmd = new Command('bench:footprint')
  .addOption(
    new Option('--workflows <n>', 'workflows created per bundle').default(300).argParser(wholeNumber('--workflows')),
  )
  .parse();
const { workflows } = cmd.opts<{ workflows: number }>();

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc (npm run bench:footprint does)');
const quiet = { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} };
// The creator reads the source map only to render stack traces; an empty one will do here.
const noSourceMap = JSON.stringify({ version: 3, sources: [], names: [], mappings: '' });

function info(i: number) {
  const now = new Date();
  return {
    workflowType: 'machineModelWorkflow',
    workflowId: `machinemodel/bench/m-${i}`,
    runId: `run-${i}`,
    firstExecutionRunId: `run-${i}`,
    taskQueue: 'bench',
    namespace: 'default',
    attempt: 1,
    historyLength: 3,
    historySize: 1024,
    continueAsNewSuggested: false,
    startTime: now,
    runStartTime: now,
    searchAttributes: {},
    typedSearchAttributes: [],
    memo: {},
    priority: {},
    unsafe: { isReplaying: false, now: Date.now },
  };
}

async function measure(label: string, preloadModules: string[]) {
  const { workflowsPath } = workflowBundleOptions();
  const { code } = await bundleWorkflowCode({ workflowsPath, preloadModules, logger: quiet });
  const bundle = { code, sourceMap: noSourceMap } as unknown as Parameters<typeof ReusableVMWorkflowCreator.create>[0];
  const creator = await ReusableVMWorkflowCreator.create(bundle, 5_000, new Set());
  const kept: Awaited<ReturnType<typeof creator.createWorkflow>>[] = [];
  gc!();
  const heapBefore = process.memoryUsage().heapUsed;
  const cpuBefore = process.cpuUsage();
  for (let i = 0; i < workflows; i++) {
    const options = { info: info(i), randomnessSeed: [i], now: Date.now(), showStackTraceSources: false };
    kept.push(await creator.createWorkflow(options as unknown as Parameters<typeof creator.createWorkflow>[0]));
  }
  const cpu = process.cpuUsage(cpuBefore);
  gc!();
  const heap = (process.memoryUsage().heapUsed - heapBefore) / workflows / 1024;
  console.log(
    `| ${label} | ${preloadModules.length} | ${heap.toFixed(1)} | ${((cpu.user + cpu.system) / 1000 / workflows).toFixed(2)} |`,
  );
  for (const w of kept) await w.dispose();
  await creator.destroy();
}

console.log(`${workflows} workflows created per bundle, each kept\n`);
console.log('| bundle | modules shared | heap per workflow (KiB) | CPU per creation (ms) |\n|---|---|---|---|');
await measure('nothing shared', []);
await measure('as built', workflowBundleOptions().preloadModules);
