import { randomUUID } from 'node:crypto';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import { freePort } from '../../tools/local-stack/processes.js';
import {
  installCrds,
  operatorMetric,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const models = 20;
const tenantFinalizer = 'tenant.example.com/keep';
let operator: OperatorProcess;
let ns: string;
let metricsPort: number;

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('ns-delete');
  metricsPort = await freePort();
  operator = startOperatorProcess(
    stack,
    { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `mmo-${randomUUID()}`, MMO_METRICS_PORT: String(metricsPort) },
    'namespace-deletion',
  );
});

afterAll(async () => {
  await operator?.stop();
});

/** Everything a watch of `path` reports until stopped: each object as it was at each change, and when. */
async function record(path: string): Promise<{ seen: any[]; deletedAt: Map<string, number>; stop: () => void }> {
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  const seen: any[] = [];
  const deletedAt = new Map<string, number>();
  const request = await new Watch(kc).watch(
    path,
    {},
    (type, obj) => {
      seen.push(obj);
      if (type === 'DELETED') deletedAt.set(obj.metadata.name, Date.now());
    },
    () => undefined,
  );
  return { seen, deletedAt, stop: () => request.abort() };
}

describe('deleting a namespace that holds models', () => {
  it(`deletes ${models} models without a Failed phase or a Warning Event on the way`, async () => {
    const names = Array.from({ length: models }, (_, i) => `doomed-${i}`);
    k.apply(names.map((n) => machineModel(ns, n)));
    await eventually(
      `${models} models Ready`,
      () =>
        k.list('machinemodel', ns).filter((m) => m.status?.phase === 'Ready').length === models ? true : undefined,
      120_000,
    );
    const phases = await record(`/apis/stable.example.com/v1/namespaces/${ns}/machinemodels`);
    const events = await record(`/api/v1/namespaces/${ns}/events`);
    const namespaces = await record('/api/v1/namespaces');
    try {
      k.kubectl('delete', 'namespace', ns, '--wait=false');
      await eventually(`namespace ${ns} gone`, () => namespaces.deletedAt.get(ns), 180_000);
    } finally {
      phases.stop();
      events.stop();
      namespaces.stop();
    }
    const failed = phases.seen
      .filter((m) => m.status?.phase === 'Failed')
      .map((m) => `${m.metadata.name}: ${m.status.conditions?.find((c: any) => c.type === 'Ready')?.message}`);
    // The operator's Events, about models; the apiserver's own (its ClusterIP repair, say) are not under test.
    const warnings = events.seen
      .filter((e) => e.type === 'Warning' && e.involvedObject?.kind === 'MachineModel')
      .map((e) => `${e.reason}: ${e.message}`);
    const deleting = new Set(phases.seen.filter((m) => m.status?.phase === 'Deleting').map((m) => m.metadata.name));
    console.log(
      `namespace deletion: ${phases.seen.length} model updates, ${deleting.size} of ${models} models went through ` +
        `Deleting, ${failed.length} Failed, ${warnings.length} Warning Events on models`,
    );
    expect(failed).toEqual([]);
    expect([...new Set(warnings)]).toEqual([]);

    // Their workflows are told once the namespace's deletion is over, not while it needs the cores.
    const client = await temporalClient(stack);
    try {
      const gone = namespaces.deletedAt.get(ns)!;
      const handles = names.map((n) => client.workflow.getHandle(`machinemodel/${ns}/${n}`));
      const closed = await eventually(
        `${models} workflows completed`,
        async () => {
          const described = await Promise.all(handles.map((h) => h.describe()));
          return described.every((d) => d.status.name === 'COMPLETED') ? described : undefined;
        },
        60_000,
      );
      const modelsGone = [...phases.deletedAt.values()];
      expect(modelsGone).toHaveLength(models);
      // Every model went well before its namespace; the server's clock and ours are the same machine's.
      const closedBeforeNamespace = closed.filter((d) => d.closeTime!.getTime() < gone - 200).map((d) => d.workflowId);
      console.log(
        `models gone ${((gone - Math.max(...modelsGone)) / 1000).toFixed(1)} s before their namespace; workflows ` +
          `closed ${Math.max(...closed.map((d) => d.closeTime!.getTime() - gone))} ms after it at the latest`,
      );
      expect(closedBeforeNamespace).toEqual([]);
      expect(await operatorMetric(metricsPort, 'machinemodel_operator_deletions_released_total')).toBe(models);
    } finally {
      await client.connection.close();
    }
  }, 300_000);

  it('tells the models of two namespaces deleted together once both are gone, whatever a tenant’s namespace kept terminating does', async () => {
    const a = k.createNamespace('ns-delete-a');
    const b = k.createNamespace('ns-delete-b');
    const stuck = k.createNamespace('ns-delete-stuck');
    const port = await freePort();
    const own = startOperatorProcess(
      stack,
      { MMO_NAMESPACES: `${a},${b},${stuck}`, MMO_TASK_QUEUE: `mmo-${randomUUID()}`, MMO_METRICS_PORT: String(port) },
      'namespace-deletion-two',
    );
    const client = await temporalClient(stack);
    const namespaces = await record('/api/v1/namespaces');
    const held = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'held', namespace: stuck, finalizers: ['test.example.com/hold'] },
    };
    // A tenant keeps its namespace terminating: a finalizer of its own on a model, another on a ConfigMap.
    const kept = machineModel(stuck, 'kept', {}, { finalizers: [tenantFinalizer] });
    try {
      const names = [a, a, a, b, b, b].map((ns, i) => ({ ns, name: `doomed-${i}` }));
      k.apply([...names.map(({ ns, name }) => machineModel(ns, name)), held, kept, machineModel(stuck, 'goes')]);
      await eventually(
        '8 models Ready',
        () =>
          [a, b, stuck].flatMap((ns) => k.list('machinemodel', ns)).filter((m) => m.status?.phase === 'Ready')
            .length === 8
            ? true
            : undefined,
        120_000,
      );
      // Its namespace makes no progress once `goes` went, so it holds up the others' for no longer than
      // the lane's settle time (helper-34: it held them the lane's full 5 minutes, at every deletion).
      k.kubectl('delete', 'namespace', stuck, '--wait=false');
      k.kubectl('delete', 'namespace', a, b, '--wait=false');
      await eventually(
        `namespaces ${a} and ${b} gone`,
        () => namespaces.deletedAt.has(a) && namespaces.deletedAt.has(b),
        180_000,
      );
      const bothGone = Math.max(namespaces.deletedAt.get(a)!, namespaces.deletedAt.get(b)!);
      const handles = names.map(({ ns, name }) => client.workflow.getHandle(`machinemodel/${ns}/${name}`));
      const closed = await eventually(
        '6 workflows completed, with a namespace still terminating',
        async () => {
          const described = await Promise.all(handles.map((h) => h.describe()));
          return described.every((d) => d.status.name === 'COMPLETED') ? described : undefined;
        },
        60_000,
      );
      expect(k.kubectl('get', 'namespace', stuck, '-o', 'jsonpath={.status.phase}')).toBe('Terminating');
      expect(k.list('machinemodel', stuck).map((m) => m.metadata.name)).toEqual(['kept']);
      console.log(
        `two namespaces gone ${Math.abs(namespaces.deletedAt.get(a)! - namespaces.deletedAt.get(b)!)} ms apart; ` +
          `workflows closed ${Math.max(...closed.map((d) => d.closeTime!.getTime() - bothGone))} ms after the later at the latest`,
      );
      expect(closed.filter((d) => d.closeTime!.getTime() < bothGone - 200).map((d) => d.workflowId)).toEqual([]);
      // `goes`, held beside them, is told too; `kept` is not deleted, so nothing is held for it.
      await eventually(
        'the workflow of the model that went from the kept namespace completed',
        async () =>
          (await client.workflow.getHandle(`machinemodel/${stuck}/goes`).describe()).status.name === 'COMPLETED'
            ? true
            : undefined,
        60_000,
      );
      expect(await operatorMetric(port, 'machinemodel_operator_deletions_released_total')).toBe(7);
    } finally {
      k.kubectl('-n', stuck, 'patch', 'configmap', 'held', '--type=merge', '-p', '{"metadata":{"finalizers":null}}');
      k.kubectl('-n', stuck, 'patch', 'machinemodel', 'kept', '--type=merge', '-p', '{"metadata":{"finalizers":null}}');
      namespaces.stop();
      await client.connection.close();
      expect(await own.stop()).toBe(0);
    }
  }, 300_000);

  it('without a gateway, goes while the operator is stopped: no finalizer waits on it', async () => {
    const away = k.createNamespace('ns-delete-away');
    const names = ['left-0', 'left-1', 'left-2'];
    const own = startOperatorProcess(
      stack,
      { MMO_NAMESPACES: away, MMO_TASK_QUEUE: `mmo-${randomUUID()}` },
      'namespace-deletion-away',
    );
    try {
      k.apply(names.map((n) => machineModel(away, n)));
      await eventually(
        '3 models Ready',
        () => (k.list('machinemodel', away).filter((m) => m.status?.phase === 'Ready').length === 3 ? true : undefined),
        60_000,
      );
    } finally {
      expect(await own.stop()).toBe(0);
    }
    k.kubectl('delete', 'namespace', away, '--wait=false');
    await eventually(
      `namespace ${away} gone without the operator`,
      () => (k.kubectl('get', 'namespace', '-o', 'name').includes(`namespace/${away}\n`) ? undefined : true),
      60_000,
    );
  }, 120_000);
});
