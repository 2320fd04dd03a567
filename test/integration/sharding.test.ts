// Two replicas with --shards, as the installed ServiceAccount (deploy/operator/rbac.yaml): they split
// the shards through Leases, each keeps only its shards' objects, each model's workflow runs on its
// namespace's shard queue, a change is signalled once (not once per replica), and a replica killed
// without a word has its shards taken and its models reconciled by the other. Played three times: on
// the shared stack (ShardedListAndWatch on) with the apiserver's hash, which that apiserver filters
// itself, and with the mixed hash (the default), on which it cannot; and on a small stack of its own
// with the gate off and the apiserver's hash, where the apiserver ignores the selector and the
// informer's own filter does all the work.
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultPayloadConverter, type Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { workflowIdFor } from '../../src/core/api.js';
import { shardOf, shardTaskQueue, type ShardHash } from '../../src/core/shards.js';
import { down, up, type StackInfo } from '../../tools/local-stack/stack.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  operatorMetric,
  shardsHeld,
  startShardedReplica,
  temporalClient,
  type ShardedReplica,
} from '../support/operator-process.js';

const shards = 4;

/** A stack like the shared one but for the gate, without a real node: the models need none. */
async function stackWithGateOff(): Promise<{ stack: StackInfo; stop: () => Promise<void> }> {
  const stateDir = mkdtempSync(path.join(os.tmpdir(), 'mmo-gate-off-'));
  process.env.MMO_SHARDED_LIST_AND_WATCH = 'false';
  try {
    const stack = await up({
      stateDir,
      ports: 'auto',
      fresh: true,
      realNode: false,
      podMetrics: false,
      objectStore: false,
      log: () => undefined,
    });
    return { stack, stop: () => down(stateDir, true) };
  } finally {
    delete process.env.MMO_SHARDED_LIST_AND_WATCH;
  }
}

function scenario(
  gate: 'on' | 'off',
  hash: ShardHash,
  getStack: () => Promise<{ stack: StackInfo; stop?: () => Promise<void> }>,
) {
  const layout = { count: shards, hash };
  describe(`replicas that split the shards (ShardedListAndWatch ${gate}, ${hash} hash)`, () => {
    const taskQueue = `mmo-shards-${randomUUID().slice(0, 8)}`;
    let stack: StackInfo;
    let stop: (() => Promise<void>) | undefined;
    let k: ReturnType<typeof kubectlFor>;
    let client: Client;
    /** Namespaces covering every shard, two in each. */
    const namespaces: string[] = [];
    const replicas: (ShardedReplica & { name: string })[] = [];

    async function startReplica(name: string): Promise<void> {
      const replica = await startShardedReplica(stack, layout, `shards-${gate}-${name}`, {
        MMO_TASK_QUEUE: taskQueue,
        MMO_NAMESPACES: namespaces.join(','),
      });
      replicas.push({ ...replica, name });
    }

    const metric = (port: number, series: string) => operatorMetric(port, series).catch(() => NaN);

    /** The signals a model's workflows received that name this resourceVersion (alone or merged). */
    async function signalsNaming(namespace: string, name: string, resourceVersion: string): Promise<number> {
      let count = 0;
      for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowIdFor(namespace, name)}'` })) {
        const { events } = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
        for (const e of events ?? []) {
          const payload = e.workflowExecutionSignaledEventAttributes?.input?.payloads?.[0];
          if (!payload) continue;
          const hint = defaultPayloadConverter.fromPayload<{ resourceVersion?: string; versions?: string[] }>(payload);
          if (hint?.resourceVersion === resourceVersion || hint?.versions?.includes(resourceVersion)) count++;
        }
      }
      return count;
    }

    function readyAt(namespace: string, name: string, generation: number): true | undefined {
      const m = k.get('machinemodel', namespace, name);
      return m?.status?.phase === 'Ready' && m.status.observedGeneration >= generation ? true : undefined;
    }

    beforeAll(async () => {
      ({ stack, stop } = await getStack());
      k = kubectlFor(stack);
      installCrds(stack);
      client = await temporalClient(stack);
      const perShard = new Map<number, number>();
      while ([...Array(shards).keys()].some((s) => (perShard.get(s) ?? 0) < 2)) {
        const ns = k.createNamespace('shard');
        const s = shardOf(ns, layout);
        if ((perShard.get(s) ?? 0) >= 2) {
          k.kubectl('delete', 'namespace', ns, '--wait=false');
          continue;
        }
        perShard.set(s, (perShard.get(s) ?? 0) + 1);
        namespaces.push(ns);
      }
    }, 300_000);

    afterAll(async () => {
      await Promise.all(replicas.map((r) => r.process.stop()));
      if (stop) await stop();
      else for (const ns of namespaces) k.kubectl('delete', 'namespace', ns, '--wait=false');
      await client?.connection.close();
    });

    it('split the shards, keep only their objects, run each model on its shard queue and signal a change once', async () => {
      await startReplica('a');
      await startReplica('b');
      const held = await eventually(
        'each replica holding half the shards',
        async () => {
          const counts = await Promise.all(replicas.map(shardsHeld));
          return counts.every((c) => c === shards / 2) ? counts : undefined;
        },
        60_000,
      );
      expect(held).toEqual([2, 2]);
      // Before this, one replica may have held every shard for a moment: its pollers stay listed.
      const splitAt = Date.now();
      for (const r of replicas)
        expect(await metric(r.metrics, 'machinemodel_operator_shards_server_side')).toBe(
          gate === 'on' && hash === 'apiserver' ? 1 : 0,
        );
      k.apply(namespaces.map((ns) => machineModel(ns, 'm')));
      for (const ns of namespaces) await eventually(`${ns}/m Ready`, () => readyAt(ns, 'm', 1), 120_000);

      for (const ns of namespaces) {
        const description = await client.workflow.getHandle(workflowIdFor(ns, 'm')).describe();
        expect(description.taskQueue, ns).toBe(shardTaskQueue(taskQueue, shardOf(ns, layout)));
      }
      // One worker per shard: since the split, each shard's queue is polled by one process (each got
      // its models' first tasks since), two processes in all.
      const pollers = new Set<string>();
      for (const s of [...Array(shards).keys()]) {
        const { pollers: seen } = await client.workflowService.describeTaskQueue({
          namespace: client.options.namespace,
          taskQueue: { name: shardTaskQueue(taskQueue, s) },
          taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        });
        const since = (seen ?? []).filter(({ lastAccessTime: t }) => {
          return Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6 >= splitAt;
        });
        const identities = new Set(since.map((p) => p.identity!));
        expect([...identities], shardTaskQueue(taskQueue, s)).toHaveLength(1);
        for (const id of identities) pollers.add(id);
      }
      expect(pollers.size).toBe(2);
      // Two shards each, two namespaces a shard, one model a namespace: four models in each cache.
      for (const r of replicas) {
        const cached = await metric(r.metrics, 'machinemodel_operator_informer_cached_objects{kind="MachineModel"}');
        expect(cached, r.name).toBe(4);
      }

      const ns = namespaces[0]!;
      // The version the patch made (the round's status writes make newer ones).
      const patched = JSON.parse(
        k.kubectl(
          '-n',
          ns,
          'patch',
          'machinemodel',
          'm',
          '--type=merge',
          '-p',
          '{"spec":{"maxReplicas":2}}',
          '-o',
          'json',
        ),
      );
      await eventually('the change reconciled', () => readyAt(ns, 'm', patched.metadata.generation), 60_000);
      // Unsharded, each replica's informer signals every change: two signals for this one.
      expect(await signalsNaming(ns, 'm', patched.metadata.resourceVersion)).toBe(1);
    }, 300_000);

    it("takes a killed replica's shards and reconciles its models", async () => {
      const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
      await b.process.kill();
      const killedAt = Date.now();
      await eventually(
        'the survivor holding every shard',
        async () => ((await shardsHeld(a)) === shards ? true : undefined),
        60_000,
      );
      console.log(
        `gate ${gate}: shards owned again ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the replica was killed`,
      );
      for (const ns of namespaces) {
        k.kubectl('-n', ns, 'patch', 'machinemodel', 'm', '--type=merge', '-p', '{"spec":{"maxReplicas":3}}');
      }
      for (const ns of namespaces) {
        const generation = k.get('machinemodel', ns, 'm').metadata.generation as number;
        await eventually(`${ns}/m reconciled by the survivor`, () => readyAt(ns, 'm', generation), 90_000);
      }
      expect(await metric(a.metrics, 'machinemodel_operator_informer_cached_objects{kind="MachineModel"}')).toBe(8);
    }, 300_000);
  });
}

scenario('on', 'apiserver', async () => ({ stack: inject('stack') }));
scenario('on', 'mixed', async () => ({ stack: inject('stack') }));
scenario('off', 'apiserver', stackWithGateOff);
