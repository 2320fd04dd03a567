import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ReconcileMetrics } from '../../src/plumbing/reconcile-metrics.js';
import { currentRunVersion, patches, type PatchRecord } from '../../workflows/patches.js';
import { patchMarkersOf, type RecordedHistory } from '../support/histories.js';

const dir = fileURLToPath(new URL('../histories', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
const workflowsPath = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

describe('replay of recorded histories', () => {
  it('has histories to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(3);
  });

  it.each(files)('replays %s deterministically with the current workflow code', async (file) => {
    // The SDK accepts the CLI's JSON form of a history (`temporal workflow show -o json`) as is.
    const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    const registry = new Registry();
    const sinks = new ReconcileMetrics(registry).sinks();
    await Worker.runReplayHistory({ workflowsPath, sinks }, history, `replay-${file}`);
    // A replayed round is not counted again: the operator's round metrics come from live rounds only.
    const rounds = await registry.getSingleMetric('machinemodel_operator_reconcile_rounds_total')!.get();
    expect(rounds.values.reduce((sum, v) => sum + v.value, 0)).toBe(0);
  });

  // A rolling upgrade: the new informer starts a run at the current run version, a worker of the code
  // just before run versions (it has every run-versioned patch) takes its tasks and records their
  // markers, then a new worker replays them.
  const runVersioned = Object.entries(patches)
    .filter(([, p]) => (p as PatchRecord).sinceRunVersion !== undefined)
    .map(([id]) => id);
  const byOlderWorker = files.filter((f) => {
    const marked = patchMarkersOf(read(f));
    return runVersioned.every((id) => marked.includes(id));
  });

  it('has histories that an older worker with every run-versioned patch recorded', () => {
    expect(byOlderWorker.length).toBeGreaterThanOrEqual(1);
  });

  it.each(byOlderWorker)(
    'replays %s as a run started at the current run version whose markers an older worker recorded',
    async (file) => {
      const history = read(file);
      const started = history.events[0]!.workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
      const input = JSON.parse(Buffer.from(started.data!, 'base64').toString('utf8')) as Record<string, unknown>;
      expect(input.runVersion).toBeUndefined();
      started.data = Buffer.from(JSON.stringify({ ...input, runVersion: currentRunVersion })).toString('base64');
      const sinks = new ReconcileMetrics(new Registry()).sinks();
      await Worker.runReplayHistory({ workflowsPath, sinks }, history, `replay-upgraded-${file}`);
    },
  );
});

function read(file: string): RecordedHistory {
  return JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as RecordedHistory;
}
