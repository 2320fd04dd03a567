import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { workflowIdFor } from '../../src/core/api.js';
import { stateQuery } from '../../workflows/definitions.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let client: Client;
let custom: CustomObjectsApi;

beforeAll(async () => {
  installCrds(stack);
  client = await temporalClient(stack);
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  custom = kc.makeApiClient(CustomObjectsApi);
});

afterAll(async () => {
  await client?.connection.close();
});

function operatorFor(ns: string, name: string): OperatorProcess {
  return startOperatorProcess(stack, { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: taskQueue }, name);
}

const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

/** Every model Ready with exactly its own Deployment and Service, and no child left without a model. */
async function expectConverged(ns: string, expected: string[], timeoutMs: number): Promise<void> {
  await eventually(
    `${expected.length} models Ready`,
    () => {
      const models = k.list('machinemodel', ns);
      const ready = models.filter(
        (m) => m.status?.phase === 'Ready' && m.status.observedGeneration === m.metadata.generation,
      );
      return ready.length === expected.length && models.length === expected.length ? true : undefined;
    },
    timeoutMs,
  );
  const selector = 'app.kubernetes.io/managed-by=machinemodel-operator';
  const models = new Map(k.list('machinemodel', ns).map((m) => [m.metadata.name as string, m.metadata.uid as string]));
  expect([...models.keys()].sort()).toEqual([...expected].sort());
  for (const kind of ['deployment', 'service']) {
    const children = await eventually(`${kind}s of deleted models collected`, () => {
      const items = k.list(kind, ns, selector);
      return items.length === expected.length ? items : undefined;
    });
    for (const child of children) {
      expect(models.get(child.metadata.name)).toBe(child.metadata.ownerReferences[0].uid);
    }
  }
}

async function rounds(ns: string, name: string): Promise<number> {
  return (await client.workflow.getHandle(workflowIdFor(ns, name)).query(stateQuery)).rounds;
}

describe('operator resilience', () => {
  it('converges after being stopped while 20 models were created and 10 deleted', async () => {
    const ns = k.createNamespace('restart');
    let operator = operatorFor(ns, 'restart-1');
    const first = names('old', 10);
    k.apply(first.map((n) => machineModel(ns, n)));
    await expectConverged(ns, first, 90_000);
    expect(await operator.stop()).toBe(0);

    const created = names('new', 20);
    k.apply(created.map((n) => machineModel(ns, n)));
    k.kubectl('-n', ns, 'delete', 'mm', ...first, '--wait=false');
    // Without a gateway no finalizer holds the deleted ones: their workflows learn it when the informer is back.
    await eventually('the deleted models gone', () => (k.list('machinemodel', ns).length === 20 ? true : undefined));

    operator = operatorFor(ns, 'restart-2');
    try {
      await expectConverged(ns, created, 120_000);
      // Long before their drift check (10 hours): the informer told them after its first list.
      await eventually(
        "the deleted models' workflows completed",
        async () => {
          for (const n of first) {
            const d = await client.workflow.getHandle(workflowIdFor(ns, n)).describe();
            if (d.status.name !== 'COMPLETED') return undefined;
          }
          return true;
        },
        30_000,
      );
    } finally {
      await operator.stop();
    }
  });

  // Its own waits allow 60 s + 180 s + 120 s: the default 60 s test timeout cut them short.
  it('converges after the worker is killed with SIGKILL in the middle of a rollout of 50 models', async () => {
    const ns = k.createNamespace('sigkill');
    let operator = operatorFor(ns, 'sigkill-1');
    const models = names('m', 50);
    k.apply(models.map((n) => machineModel(ns, n, { minReplicas: 2, maxReplicas: 2 })));
    await eventually(
      'some Deployments created',
      () => (k.list('deployment', ns).length >= 5 ? true : undefined),
      60_000,
    );
    await operator.kill();
    const readyAtKill = k.list('machinemodel', ns).filter((m) => m.status?.phase === 'Ready').length;
    expect(readyAtKill).toBeLessThan(50);

    operator = operatorFor(ns, 'sigkill-2');
    const restarted = Date.now();
    try {
      await expectConverged(ns, models, 180_000);
      console.log(
        `SIGKILL: ${readyAtKill} of 50 Ready at the kill; all 50 converged ${Date.now() - restarted}ms after the restart`,
      );
      for (const m of k.list('deployment', ns)) expect(m.spec.replicas).toBe(2);
    } finally {
      await operator.stop();
    }
    // Deleting them all afterwards leaves no stuck finalizer.
    operator = operatorFor(ns, 'sigkill-3');
    try {
      const deleting = Date.now();
      k.kubectl('-n', ns, 'delete', 'mm', '--all', '--wait=true', '--timeout=120s');
      expect(k.list('machinemodel', ns)).toHaveLength(0);
      console.log(`SIGKILL: all 50 deleted in ${Date.now() - deleting}ms`);
    } finally {
      await operator.stop();
    }
  }, 400_000);

  // Without the sticky queues reset, each run cached by the killed worker took its next task only
  // after its sticky queue's 10 s schedule-to-start timeout (src/worker/sticky-redirect.ts).
  it("sends a killed worker's runs their next tasks on its queue, not on the dead worker's sticky queue", async () => {
    const ns = k.createNamespace('sticky');
    const handle = client.workflow.getHandle(workflowIdFor(ns, 'idle'));
    let operator = operatorFor(ns, 'sticky-1');
    try {
      k.apply([machineModel(ns, 'idle')]);
      await expectConverged(ns, ['idle'], 60_000);
      await eventually('the model settled, its run cached', async () => {
        const s = await handle.query(stateQuery);
        return !s.pendingWork && !s.roundInProgress ? true : undefined;
      });
      await operator.kill();
      operator = operatorFor(ns, 'sticky-2');
      k.kubectl('-n', ns, 'patch', 'mm', 'idle', '--type=merge', '-p', '{"spec":{"minReplicas":2,"maxReplicas":2}}');
      await eventually('the change applied after the restart', () =>
        k.get('deployment', ns, 'idle')?.spec.replicas === 2 ? true : undefined,
      );
      const { events } = await handle.fetchHistory();
      const waited = (events ?? []).filter((e) => e.workflowTaskTimedOutEventAttributes);
      expect(waited.map((e) => e.workflowTaskTimedOutEventAttributes!.timeoutType)).toEqual([]);
    } finally {
      await operator.stop();
    }
  });

  it('runs active-active: two operator replicas, one workflow and one set of writes per model', async () => {
    const ns = k.createNamespace('replicas');
    const a = operatorFor(ns, 'replica-a');
    const b = operatorFor(ns, 'replica-b');
    try {
      const models = names('m', 8);
      k.apply(models.map((n) => machineModel(ns, n)));
      await expectConverged(ns, models, 120_000);
      for (const n of models) {
        const runs: string[] = [];
        for await (const w of client.workflow.list({ query: `WorkflowId = '${workflowIdFor(ns, n)}'` }))
          runs.push(w.runId);
        expect(runs).toHaveLength(1);
        const created = k.list('events', ns).filter((e) => e.involvedObject.name === n && e.reason === 'Created');
        // Deployment and Service created once, though both replicas saw every event (a repeat would raise the count).
        expect(created.map((e) => `${e.message} x${e.count}`)).toEqual([
          `Deployment and Service ${ns}/${n} created x1`,
        ]);
      }
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('ignores 100 label and annotation patches in 5 s, and coalesces 100 spec patches', async () => {
    const ns = k.createNamespace('storm');
    const operator = operatorFor(ns, 'storm');
    const patch = (body: object) =>
      custom.patchNamespacedCustomObject(
        { group: 'stable.example.com', version: 'v1', namespace: ns, plural: 'machinemodels', name: 'busy', body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    try {
      k.apply(machineModel(ns, 'busy'));
      await eventually(
        'busy Ready',
        () => (k.get('machinemodel', ns, 'busy')?.status?.phase === 'Ready' ? true : undefined),
        60_000,
      );
      await sleep(3_000);
      const before = await rounds(ns, 'busy');

      for (let i = 0; i < 100; i++) {
        await patch({ metadata: { labels: { churn: String(i) }, annotations: { 'example.com/note': `n${i}` } } });
        await sleep(50);
      }
      await sleep(3_000);
      const afterLabels = await rounds(ns, 'busy');
      console.log(`label/annotation storm: 100 patches -> ${afterLabels - before} reconcile rounds`);
      expect(afterLabels - before).toBeLessThanOrEqual(1);

      // 99 patches at 50 ms intervals without waiting for each answer, then the last one once they are all in,
      // so that v99 is certainly the final spec.
      const started = Date.now();
      const inFlight: Promise<unknown>[] = [];
      for (let i = 0; i < 99; i++) {
        inFlight.push(patch({ spec: { image: `registry.example.com/models/classifier:v${i}` } }));
        await sleep(Math.max(0, started + (i + 1) * 50 - Date.now()));
      }
      await Promise.all(inFlight);
      await patch({ spec: { image: 'registry.example.com/models/classifier:v99' } });
      const last = 'registry.example.com/models/classifier:v99';
      await eventually(
        'children follow the last spec',
        () => {
          const d = k.get('deployment', ns, 'busy');
          const mm = k.get('machinemodel', ns, 'busy');
          return d?.spec.template.spec.containers[0].image === last &&
            mm?.status?.phase === 'Ready' &&
            mm.status.observedGeneration === mm.metadata.generation
            ? true
            : undefined;
        },
        60_000,
      );
      await sleep(3_000);
      const specRounds = (await rounds(ns, 'busy')) - afterLabels;
      console.log(`spec storm: 100 patches in ${Date.now() - started}ms -> ${specRounds} reconcile rounds`);
      expect(specRounds).toBeLessThanOrEqual(10);
    } finally {
      await operator.stop();
    }
  });
});
