// A rollout outlives the operator process that runs it: two replicas split the shards (--shards, as
// installed), the one holding the model's shard is killed (SIGKILL) in the middle of a pause, and the
// other takes the shard and finishes the rollout at the same step with the time the pause had left:
// its timers add up to the pause once, and no step is taken twice. The replica that ends it counts the
// rollout in its metrics.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import type { RolloutSpec } from '../../src/core/api.js';
import { shardOf, shardTaskQueue } from '../../src/core/shards.js';
import { leasePrefixFor, shardLeaseName } from '../../src/sharding/shard-leases.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import { rolloutHistory } from '../support/rollout-history.js';
import {
  installCrds,
  operatorMetric,
  shardsHeld,
  startShardedReplica,
  temporalClient,
  type ShardedReplica,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let ns: string;
const layout = { count: 2, hash: 'mixed' } as const;
const operators: ShardedReplica[] = [];

const pauseSeconds = 60;
const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 50, pause: `${pauseSeconds}s` }] };
const status = () => k.get('machinemodel', ns, 'durable')?.status;

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('rollout-durability');
  for (const name of ['a', 'b'])
    operators.push(
      await startShardedReplica(stack, layout, `rollout-${name}`, { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: taskQueue }),
    );
  await eventually(
    'each replica holding a shard',
    async () => {
      const held = await Promise.all(operators.map(shardsHeld));
      return held.every((n) => n === 1) ? true : undefined;
    },
    60_000,
  );
});

afterAll(async () => {
  for (const o of operators) await o.process.stop();
});

it("finishes a rollout whose shard's replica was killed in the middle of a pause, at the same step, with the time it had left", async () => {
  const client = await temporalClient(stack);
  k.apply(machineModel(ns, 'durable', { image: 'registry.example/m:1', replicas: 1, rollout: plan }));
  await eventually('v1 Ready', () => (status()?.phase === 'Ready' ? true : undefined), 120_000);
  k.apply(machineModel(ns, 'durable', { image: 'registry.example/m:2', replicas: 1, rollout: plan }));
  const workflowId = await eventually(
    'the canary at 50 %',
    () => (status()?.rollout?.weight === 50 ? (status()!.rollout!.workflowId as string) : undefined),
    120_000,
  );

  // The replica whose shard holds the model's namespace runs its workflows: that one goes.
  const lease = shardLeaseName(leasePrefixFor(taskQueue), shardOf(ns, layout), layout);
  const holder = k.get('lease', 'machinemodel-system', lease)?.spec?.holderIdentity as string;
  const victim = operators.find((o) => o.identity === holder)!;
  const survivor = operators.find((o) => o !== victim)!;
  expect((await client.workflow.getHandle(workflowId).describe()).taskQueue).toBe(
    shardTaskQueue(taskQueue, shardOf(ns, layout)),
  );
  await victim.process.kill();
  await eventually(
    'promoted by the other replica',
    () => (status()?.rollout?.phase === 'Promoted' && status()?.phase === 'Ready' ? true : undefined),
    (pauseSeconds + 90) * 1000,
  );

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
    expect(await operatorMetric(survivor.metrics, promoted)).toBe(1);
    expect(
      await operatorMetric(
        survivor.metrics,
        'machinemodel_operator_rollout_duration_seconds_count{outcome="Promoted"}',
      ),
    ).toBe(1);
  } finally {
    await client.connection.close();
  }
}, 300_000);
