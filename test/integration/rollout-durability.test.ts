// A rollout outlives the operator process that runs it: two replicas share the task queue, one is
// killed (SIGKILL) in the middle of a pause, and the other finishes the rollout at the same step with
// the time the pause had left: its timers add up to the pause once, and no step is taken twice. The
// replica that ends it counts the rollout in its metrics.
import { randomUUID } from 'node:crypto';
import { freePort } from '../../tools/local-stack/processes.js';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import type { RolloutSpec } from '../../src/core/api.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import { rolloutHistory } from '../support/rollout-history.js';
import {
  installCrds,
  operatorMetric,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let ns: string;
const operators: OperatorProcess[] = [];
let survivorMetrics: number;

const pauseSeconds = 60;
const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 50, pause: `${pauseSeconds}s` }] };
const status = () => k.get('machinemodel', ns, 'durable')?.status;

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('rollout-durability');
  survivorMetrics = await freePort();
  const env = { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: taskQueue };
  operators.push(
    startOperatorProcess(stack, env, 'rollout-a'),
    startOperatorProcess(stack, { ...env, MMO_METRICS_PORT: String(survivorMetrics) }, 'rollout-b'),
  );
});

afterAll(async () => {
  for (const o of operators) await o.stop();
});

it('finishes a rollout whose operator was killed in the middle of a pause, at the same step, with the time it had left', async () => {
  k.apply(machineModel(ns, 'durable', { image: 'registry.example/m:1', replicas: 1, rollout: plan }));
  await eventually('v1 Ready', () => (status()?.phase === 'Ready' ? true : undefined), 120_000);
  k.apply(machineModel(ns, 'durable', { image: 'registry.example/m:2', replicas: 1, rollout: plan }));
  const workflowId = await eventually(
    'the canary at 50 %',
    () => (status()?.rollout?.weight === 50 ? (status()!.rollout!.workflowId as string) : undefined),
    120_000,
  );

  await operators[0]!.kill();
  await eventually(
    'promoted by the other replica',
    () => (status()?.rollout?.phase === 'Promoted' && status()?.phase === 'Ready' ? true : undefined),
    (pauseSeconds + 90) * 1000,
  );

  const client = await temporalClient(stack);
  try {
    const { handle, events, weightsSet, weightSetAt, firedTimerSeconds } = await rolloutHistory(client, workflowId);
    // The canary got its share once (and gave it back at its promotion): the rollout did not start
    // over on the other replica.
    expect(weightsSet().filter((w) => w > 0)).toHaveLength(1);
    expect(weightsSet().at(-1)).toBe(0);
    // The pause is timers of at most the health-check interval; after the weight was set they add
    // up to the pause exactly once (a pause begun again after the kill would add up to more).
    const pauseTimers = firedTimerSeconds(weightSetAt);
    expect(pauseTimers.reduce((a, b) => a + b, 0)).toBeCloseTo(pauseSeconds, 0);
    // One run of the rollout's workflow, completed.
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect(events.filter((e) => e.workflowExecutionContinuedAsNewEventAttributes)).toEqual([]);
    // The rollout's last workflow task ran on the survivor.
    const promoted = 'machinemodel_operator_rollouts_total{outcome="Promoted"}';
    expect(await operatorMetric(survivorMetrics, promoted)).toBe(1);
    expect(
      await operatorMetric(survivorMetrics, 'machinemodel_operator_rollout_duration_seconds_count{outcome="Promoted"}'),
    ).toBe(1);
  } finally {
    await client.connection.close();
  }
}, 300_000);
