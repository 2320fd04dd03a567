import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { describe, expect, inject, it } from 'vitest';
import { ReconcileMetrics } from '../../src/process/reconcile-metrics.js';
import type { RecordedHistory } from '../support/histories.js';

const dir = fileURLToPath(new URL('../histories', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));
// Replayed as the worker runs them: the bundle with the modules every workflow shares preloaded.
const workflowBundle = { code: inject('workflowBundleCode') };

describe('replay of recorded histories', () => {
  it('has histories to replay', () => {
    expect(files.length).toBeGreaterThanOrEqual(3);
  });

  it.each(files)('replays %s deterministically with the current workflow code', async (file) => {
    // The SDK accepts the CLI's JSON form of a history (`temporal workflow show -o json`) as is.
    const history: RecordedHistory = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    const registry = new Registry();
    const sinks = new ReconcileMetrics(registry).sinks();
    // On the queue the history ran on, as a real worker replays it: a model's workflow takes a move
    // only to another queue of its own install (workflowInfo().taskQueue, which is the worker's). The
    // SDK's replay worker names a queue of its own unless given one, which its options type leaves out.
    const taskQueue = history.events[0]?.workflowExecutionStartedEventAttributes?.taskQueue?.name;
    const options = { workflowBundle, sinks, taskQueue } as ReplayWorkerOptions;
    await Worker.runReplayHistory(options, history, `replay-${file}`);
    // A replayed round is not counted again: the operator's round metrics come from live rounds only.
    const rounds = await registry.getSingleMetric('machinemodel_operator_reconcile_rounds_total')!.get();
    expect(rounds.values.reduce((sum, v) => sum + v.value, 0)).toBe(0);
  });
});
