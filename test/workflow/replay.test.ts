import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { describe, expect, inject, it } from 'vitest';
import { ReconcileMetrics } from '../../src/process/reconcile-metrics.js';

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
    const history: unknown = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    const registry = new Registry();
    const sinks = new ReconcileMetrics(registry).sinks();
    await Worker.runReplayHistory({ workflowBundle, sinks }, history, `replay-${file}`);
    // A replayed round is not counted again: the operator's round metrics come from live rounds only.
    const rounds = await registry.getSingleMetric('machinemodel_operator_reconcile_rounds_total')!.get();
    expect(rounds.values.reduce((sum, v) => sum + v.value, 0)).toBe(0);
  });
});
