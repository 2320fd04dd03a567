// What the workflow code costs the worker, without a cluster or a Temporal server: each recorded
// history (test/histories) replayed `--times` times through the built workflow bundle, as the worker
// runs it, and the process CPU per replay. Replay runs the same activations as live execution does.
// Usage: npm run bench:replay -- [--times 300] [--history <file name>]
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { Command, Option } from 'commander';
import { Registry } from 'prom-client';
import { wholeNumber } from '../src/process/flags.js';
import { ReconcileMetrics } from '../src/process/reconcile-metrics.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = path.join(root, 'test/histories');

const cmd = new Command('bench:replay')
  .addOption(new Option('--times <n>', 'replays per history').default(300).argParser(wholeNumber('--times')))
  .addOption(new Option('--history <file>', 'one history of test/histories instead of all'))
  .parse();
const { times, history } = cmd.opts<{ times: number; history?: string }>();

async function main() {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const sinks = new ReconcileMetrics(new Registry()).sinks();
  const files = history ? [history] : readdirSync(dir).filter((f) => f.endsWith('.json'));
  console.log('| history | events | CPU ms per replay |\n|---|---|---|');
  for (const file of files) {
    const recorded = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as { events: unknown[] };
    async function* copies() {
      for (let i = 0; i < times; i++) yield { workflowId: `${file}-${i}`, history: recorded };
    }
    const before = process.cpuUsage();
    let failed = 0;
    for await (const r of Worker.runReplayHistories(
      { workflowBundle: { codePath: path.join(root, 'dist/workflow-bundle.js') }, sinks },
      copies(),
    )) {
      if (r.error) failed++;
    }
    const used = process.cpuUsage(before);
    if (failed) throw new Error(`${file}: ${failed} of ${times} replays failed`);
    const perReplay = (used.user + used.system) / 1000 / times;
    console.log(`| ${file} | ${recorded.events.length} | ${perReplay.toFixed(1)} |`);
  }
}

await main();
