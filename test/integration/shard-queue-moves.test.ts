// Workflows that run on another queue of the install than their own move to it (the
// `moveToTaskQueue` signal; `move-to-shard-queue` patch), as the installed ServiceAccount: models
// started by an operator without shards (an install upgraded from 0.2.0) move to their shards' queues
// once sharded replicas take over; they move again when the shards' hash changes, when the count is
// lowered (their queues left unpolled are drained meanwhile), and back to the base queue when the
// install has shards no more. Each keeps being reconciled where it lands.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { workflowIdFor } from '../../src/core/api.js';
import { shardOf, shardTaskQueue, type ShardLayout } from '../../src/core/shards.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  shardsHeld,
  startOperatorProcess,
  startShardedReplica,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-moves-${randomUUID().slice(0, 8)}`;
const mixed: ShardLayout = { count: 2, hash: 'mixed' };
const apiserver: ShardLayout = { count: 2, hash: 'apiserver' };
const one: ShardLayout = { count: 1, hash: 'mixed' };
/** Namespaces on both shards of each hash, one of them on another shard under the other hash. */
const namespaces: string[] = [];
let client: Client;
const running: OperatorProcess[] = [];

beforeAll(async () => {
  installCrds(stack);
  client = await temporalClient(stack);
  const covers = () =>
    [mixed, apiserver].every((l) => new Set(namespaces.map((ns) => shardOf(ns, l))).size === 2) &&
    namespaces.some((ns) => shardOf(ns, mixed) !== shardOf(ns, apiserver));
  while (!covers() || namespaces.length < 3) namespaces.push(k.createNamespace('moves'));
}, 120_000);

afterAll(async () => {
  await Promise.all(running.map((p) => p.stop()));
  for (const ns of namespaces) k.kubectl('delete', 'namespace', ns, '--wait=false');
  await client?.connection.close();
});

const env = () => ({ MMO_TASK_QUEUE: taskQueue, MMO_NAMESPACES: namespaces.join(',') });

/** The queue each model's current run is on. */
async function queues(): Promise<string[]> {
  return Promise.all(
    namespaces.map(async (ns) => (await client.workflow.getHandle(workflowIdFor(ns, 'm')).describe()).taskQueue),
  );
}

/** Waits until each model's current run is on the queue `expected` names for its namespace. */
async function onQueues(what: string, expected: (ns: string) => string): Promise<void> {
  await eventually(
    what,
    async () => ((await queues()).every((q, i) => q === expected(namespaces[i]!)) ? true : undefined),
    60_000,
  );
}

/** Changes every model's spec and waits until each is Ready on it: a round ran wherever it runs now. */
async function reconciledEverywhere(maxReplicas: number): Promise<void> {
  for (const ns of namespaces)
    k.kubectl('-n', ns, 'patch', 'machinemodel', 'm', '--type=merge', '-p', JSON.stringify({ spec: { maxReplicas } }));
  for (const ns of namespaces) {
    const generation = k.get('machinemodel', ns, 'm').metadata.generation as number;
    await eventually(
      `${ns}/m reconciled at generation ${generation}`,
      () => {
        const m = k.get('machinemodel', ns, 'm');
        return m?.status?.phase === 'Ready' && m.status.observedGeneration >= generation ? true : undefined;
      },
      90_000,
    );
  }
}

async function stopAll(): Promise<void> {
  for (const p of running.splice(0)) expect(await p.stop()).toBe(0);
}

describe('model workflows on another queue of the install than their shard’s', () => {
  it('move to their shards’ queues once sharded replicas take over from an operator without shards', async () => {
    running.push(startOperatorProcess(stack, env(), 'moves-unsharded'));
    k.apply(namespaces.map((ns) => machineModel(ns, 'm')));
    for (const ns of namespaces)
      await eventually(`${ns}/m Ready`, () => (k.phaseOf(ns, 'm') === 'Ready' ? true : undefined), 120_000);
    expect(await queues()).toEqual(namespaces.map(() => taskQueue));
    await stopAll();

    for (const name of ['moves-a', 'moves-b']) {
      const replica = await startShardedReplica(stack, mixed, name, env());
      running.push(replica.process);
      await eventually(
        `${name} holding a shard`,
        async () => ((await shardsHeld(replica)) >= 1 ? true : undefined),
        60_000,
      );
    }
    await onQueues('every workflow on its shard’s queue', (ns) => shardTaskQueue(taskQueue, shardOf(ns, mixed)));
    await reconciledEverywhere(2);
  }, 300_000);

  it('move again when the shards’ hash changes', async () => {
    await stopAll();
    const replica = await startShardedReplica(stack, apiserver, 'moves-apiserver', env());
    running.push(replica.process);
    await onQueues('every workflow on its shard’s queue under the new hash', (ns) =>
      shardTaskQueue(taskQueue, shardOf(ns, apiserver)),
    );
    await reconciledEverywhere(3);
  }, 300_000);

  it('move to shard 0 when the count is lowered, their queue drained meanwhile, then back to the base queue', async () => {
    await stopAll();
    // Every namespace is on shard 0 now: those on shard 1's queue cannot take a move unless drained.
    expect(new Set(await queues())).toContain(shardTaskQueue(taskQueue, 1));
    const replica = await startShardedReplica(stack, one, 'moves-one', env());
    running.push(replica.process);
    await onQueues('every workflow on shard 0’s queue', () => shardTaskQueue(taskQueue, 0));
    await reconciledEverywhere(4);
    await stopAll();

    running.push(startOperatorProcess(stack, env(), 'moves-unsharded-again'));
    await onQueues('every workflow on the base queue', () => taskQueue);
    await reconciledEverywhere(5);
  }, 300_000);
});
