import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GatewayApiDriver } from '../../activities/gateway/gateway-api-driver.js';
import { createActivities } from '../../activities/index.js';
import { KubeClient } from '../../activities/kube-client.js';
import { routeIdAnnotation } from '../../src/core/api.js';
import { childLabels, defaultBuildOptions } from '../../src/core/desired-state.js';
import {
  delegatedHostnamesAnnotation,
  delegatedPrefixesAnnotation,
  routeId,
  type ExistingRoute,
} from '../../src/core/route-rules.js';
import { gatewayApiCrdFiles } from '../../tools/local-stack/gateway-api-crds.js';
import { janitorSweepSignal, janitorWorkflowId } from '../../workflows/definitions.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  operatorKubeconfig,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let operator: OperatorProcess;
let ns: string;
let gwNs: string;

beforeAll(() => {
  installCrds(stack);
  for (const file of gatewayApiCrdFiles()) k.kubectl('apply', '--server-side', '-f', file);
  k.kubectl(
    'wait',
    '--for=condition=Established',
    'crd/httproutes.gateway.networking.k8s.io',
    'crd/gateways.gateway.networking.k8s.io',
    '--timeout=30s',
  );
  gwNs = k.createNamespace('gateways');
  k.apply({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata: { name: 'public', namespace: gwNs },
    spec: {
      gatewayClassName: 'example',
      listeners: [{ name: 'http', protocol: 'HTTP', port: 80, allowedRoutes: { namespaces: { from: 'All' } } }],
    },
  });
  ns = k.createNamespace('httproute');
  // Tests below publish outside /models/<namespace>/ and on a hostname, as an administrator may allow.
  k.kubectl('annotate', 'namespace', ns, `${delegatedPrefixesAnnotation}=/api/shared,/v2/moving`);
  k.kubectl('annotate', 'namespace', ns, `${delegatedHostnamesAnnotation}=models.example.com`);
  operator = startOperatorProcess(
    stack,
    {
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: taskQueue,
      MMO_GATEWAY: 'gateway-api',
      MMO_GATEWAY_PARENT: `${gwNs}/public`,
      MMO_GATEWAY_PUBLIC_URL: 'https://api.example.com',
    },
    'gateway-api',
  );
});

afterAll(async () => {
  await operator?.stop();
});

describe('publication as a Gateway API HTTPRoute', () => {
  it('creates the HTTPRoute with parentRef, path and backend, and deletes it with the model', async () => {
    k.apply(machineModel(ns, 'routed', { endpointType: 'REST' }));
    const mm = await eventually<any>(
      'registered',
      () => {
        const m = k.get('machinemodel', ns, 'routed');
        const c = conditionOf(m, 'GatewayRegistered');
        return c?.status === 'True' ? m : undefined;
      },
      60_000,
    );
    expect(mm.status.gatewayURL).toBe(`https://api.example.com/models/${ns}/routed`);
    const route = k.get('httproute', ns, 'routed');
    expect(route.spec.parentRefs).toEqual([
      expect.objectContaining({ kind: 'Gateway', name: 'public', namespace: gwNs }),
    ]);
    expect(route.spec.rules[0].matches[0].path).toEqual({ type: 'PathPrefix', value: `/models/${ns}/routed` });
    expect(route.spec.rules[0].backendRefs[0]).toMatchObject({ name: 'routed', port: 80 });
    expect(route.metadata.ownerReferences[0]).toMatchObject({
      kind: 'MachineModel',
      uid: mm.metadata.uid,
      controller: true,
    });

    k.kubectl('-n', ns, 'delete', 'mm', 'routed', '--wait=true', '--timeout=60s');
    expect(k.get('httproute', ns, 'routed')).toBeUndefined();
  });

  it('splits a canary step by backendRefs weights on the HTTPRoute, and goes back to one backend once promoted', async () => {
    const plan = { strategy: 'Canary' as const, steps: [{ weight: 30, pause: '15s' }] };
    k.apply(machineModel(ns, 'split', { rollout: plan }));
    await eventually('v1 Ready', () => k.get('machinemodel', ns, 'split')?.status?.phase === 'Ready', 60_000);
    k.kubectl('-n', ns, 'patch', 'mm', 'split', '--type=merge', '-p', '{"spec":{"image":"registry.example.com/m:v2"}}');
    // As the apiserver stored it, under the Gateway API CRDs' own validation.
    const split = await eventually<any>(
      'the route split 70/30',
      () => {
        const r = k.get('httproute', ns, 'split');
        return r?.spec.rules[0].backendRefs.length === 2 ? r : undefined;
      },
      60_000,
    );
    expect(split.spec.rules[0].backendRefs).toEqual([
      expect.objectContaining({ name: 'split', port: 80, weight: 70 }),
      expect.objectContaining({ name: 'split-canary', port: 80, weight: 30 }),
    ]);
    // The model's status follows a moment later (the rollout reports to the model's workflow by signal).
    await eventually('status.rollout at 30 %', () =>
      k.get('machinemodel', ns, 'split')?.status?.rollout?.weight === 30 ? true : undefined,
    );
    await eventually(
      'promoted, one backend again',
      () => {
        const r = k.get('httproute', ns, 'split');
        return k.get('machinemodel', ns, 'split')?.status?.rollout?.phase === 'Promoted' &&
          r?.spec.rules[0].backendRefs.length === 1 &&
          !k.get('deployment', ns, 'split-canary')
          ? true
          : undefined;
      },
      120_000,
    );
    expect(k.get('httproute', ns, 'split').spec.rules[0].backendRefs[0]).toMatchObject({ name: 'split', port: 80 });
  }, 240_000);

  it('repairs a deleted HTTPRoute at once (the informer watches them)', async () => {
    k.apply(machineModel(ns, 'repaired'));
    const first = await eventually<any>('route', () => k.get('httproute', ns, 'repaired'), 60_000);
    k.kubectl('-n', ns, 'delete', 'httproute', 'repaired', '--wait=true');
    const again = await eventually<any>(
      'route recreated',
      () => {
        const r = k.get('httproute', ns, 'repaired');
        return r && r.metadata.uid !== first.metadata.uid ? r : undefined;
      },
      30_000,
    );
    expect(again.spec.rules[0].matches[0].path.value).toBe(`/models/${ns}/repaired`);
  });

  it('follows a changed path prefix and hostnames', async () => {
    k.apply(machineModel(ns, 'moving'));
    await eventually('first route', () => k.get('httproute', ns, 'moving'), 60_000);
    k.kubectl(
      '-n',
      ns,
      'patch',
      'mm',
      'moving',
      '--type=merge',
      '-p',
      '{"spec":{"gateway":{"pathPrefix":"/v2/moving","hostnames":["models.example.com"]}}}',
    );
    const route = await eventually<any>(
      'route updated',
      () => {
        const r = k.get('httproute', ns, 'moving');
        return r?.spec.rules[0].matches[0].path.value === '/v2/moving' ? r : undefined;
      },
      60_000,
    );
    expect(route.spec.hostnames).toEqual(['models.example.com']);
  });
});

describe('path prefix collisions between HTTPRoutes', () => {
  it('refuses a second model on the same prefix, and creates no route for it', async () => {
    k.apply(machineModel(ns, 'first', { gateway: { pathPrefix: '/api/shared' } }));
    await eventually('first route', () => k.get('httproute', ns, 'first'), 60_000);
    k.apply(machineModel(ns, 'second', { gateway: { pathPrefix: '/api/shared' } }));
    const c = await eventually<any>(
      'PathConflict',
      () => {
        const cond = conditionOf(k.get('machinemodel', ns, 'second'), 'GatewayRegistered');
        return cond?.reason === 'PathConflict' ? cond : undefined;
      },
      60_000,
    );
    expect(c.message).toContain(`MachineModel ${ns}/first`);
    expect(k.get('httproute', ns, 'second')).toBeUndefined();
  });
});

describe('bad Gateway API configuration', () => {
  it('reports a parent Gateway that does not exist, and creates no route', async () => {
    const ns2 = k.createNamespace('no-parent');
    const op = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns2,
        MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
        MMO_GATEWAY: 'gateway-api',
        MMO_GATEWAY_PARENT: `${gwNs}/missing`,
      },
      'gateway-api-missing',
    );
    try {
      k.apply(machineModel(ns2, 'orphaned'));
      const c = await eventually<any>(
        'GatewayMisconfigured',
        () => {
          const m = k.get('machinemodel', ns2, 'orphaned');
          const cond = conditionOf(m, 'GatewayRegistered');
          return cond?.reason === 'GatewayMisconfigured' ? cond : undefined;
        },
        60_000,
      );
      expect(c.message).toContain(`parent Gateway ${gwNs}/missing does not exist`);
      expect(k.get('httproute', ns2, 'orphaned')).toBeUndefined();
      expect(k.get('machinemodel', ns2, 'orphaned').status.phase).toBe('Ready');
    } finally {
      await op.stop();
    }
  });
});

/**
 * Asks the suite's gateway janitor for a sweep and waits until a whole sweep ran after the ask: a sweep
 * ends with its removals, so the second inspection scheduled after the ask closes the first.
 */
async function janitorSwept(): Promise<void> {
  const client = await temporalClient(stack);
  try {
    const id = janitorWorkflowId(taskQueue);
    const inspections = async () => {
      const { runId } = await client.workflow.getHandle(id).describe();
      const { events } = await client.workflow.getHandle(id, runId).fetchHistory();
      const n = (events ?? []).filter(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'inspectGateway',
      ).length;
      return { runId, n };
    };
    const before = await inspections();
    await eventually(
      'a whole janitor sweep after the ask',
      async () => {
        // Asked again each time: a request that arrives during a sweep is cleared when that sweep ends.
        await client.workflow.getHandle(id).signal(janitorSweepSignal);
        await sleep(500);
        const now = await inspections();
        // A run continued-as-new meanwhile began after the ask.
        return now.n >= (now.runId === before.runId ? before.n : 0) + 2;
      },
      60_000,
    );
  } finally {
    await client.connection.close();
  }
}

describe("HTTPRoutes that only look like the operator's", () => {
  it("a forged HTTPRoute in another tenant's namespace, naming this model, is not taken for its route, and neither is removed", async () => {
    // Tenant A's published model.
    k.apply(machineModel(ns, 'victim'));
    const mm = await eventually<any>(
      'victim registered',
      () => {
        const m = k.get('machinemodel', ns, 'victim');
        return conditionOf(m, 'GatewayRegistered')?.status === 'True' ? m : undefined;
      },
      60_000,
    );
    const ref = { namespace: ns, name: 'victim', uid: mm.metadata.uid as string };
    const real = k.get('httproute', ns, 'victim');

    // Tenant B may create HTTPRoutes in its own namespace: the operator's labels and route-id annotation
    // naming A's model, once with A's exact route id, once with an earlier uid (an orphan by its annotation).
    // On A's own prefix, and on every path (no match): seen to take A's route off the gateway as a
    // PathConflict before forgeries were ignored. No ownerReference: one to A's uid from another
    // namespace is the garbage collector's to remove.
    const tenantB = k.createNamespace('tenant-b');
    const stale = { ...ref, uid: randomUUID() };
    const forgery = (name: string, id: string, path?: string) => ({
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'HTTPRoute',
      metadata: { name, namespace: tenantB, labels: childLabels('victim'), annotations: { [routeIdAnnotation]: id } },
      spec: {
        parentRefs: [{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'public', namespace: gwNs }],
        rules: [
          {
            ...(path ? { matches: [{ path: { type: 'PathPrefix', value: path } }] } : {}),
            backendRefs: [{ name: 'victim', port: 80 }],
          },
        ],
      },
    });
    k.apply([forgery('victim', routeId(ref), `/models/${ns}/victim`), forgery('victim-stale', routeId(stale))]);
    const forgedUids = ['victim', 'victim-stale'].map((n) => k.get('httproute', tenantB, n).metadata.uid);
    const forged = (routes: ExistingRoute[]) => routes.filter((r) => r.pathPrefix === '/' || r.id.includes(tenantB));

    // The driver and the janitor's activities themselves, against the real apiserver.
    const kc = new KubeConfig();
    kc.loadFromFile(operatorKubeconfig(stack));
    const kube = new KubeClient(kc);
    const driver = new GatewayApiDriver(kube, {
      parent: { namespace: gwNs, name: 'public' },
      publicURL: 'https://api.example.com',
    });
    const listed = await driver.list();
    expect(listed).toContainEqual({ id: routeId(ref), owner: ref, pathPrefix: `/models/${ns}/victim` });
    // Forgeries are not listed: neither a route of A's nor a route that holds a prefix.
    expect(forged(listed)).toEqual([]);
    expect(listed.filter((r) => r.id === routeId(ref))).toHaveLength(1);
    // Removal by the id a forged route claims, or by the stale id: refused, nothing deleted.
    expect(await driver.remove(routeId(ref), { ...ref, namespace: tenantB })).toBe(false);
    expect(await driver.remove(routeId(stale), stale)).toBe(false);

    const acts = createActivities({ kube, build: defaultBuildOptions, gateway: driver });
    const { orphans, collisions } = await acts.inspectGateway();
    expect(forged(orphans)).toEqual([]);
    expect(forged(collisions)).toEqual([]);
    expect(await acts.removeOrphanRoute({ id: routeId(stale), owner: stale, pathPrefix: '/' })).toEqual({
      removed: false,
    });
    // A's own round sees the forged routes beside its own and keeps its route.
    const round = await acts.registerRoute((await acts.readModel({ namespace: ns, name: 'victim' }))!);
    expect(round.registered).toBe(true);
    expect(round.changes.filter((c) => /removed|withdrawn/.test(c))).toEqual([]);

    // And the operator's running janitor, after a whole sweep.
    await janitorSwept();
    expect(k.get('httproute', ns, 'victim')?.metadata.uid).toBe(real.metadata.uid);
    expect(['victim', 'victim-stale'].map((n) => k.get('httproute', tenantB, n)?.metadata.uid)).toEqual(forgedUids);
    expect(conditionOf(k.get('machinemodel', ns, 'victim'), 'GatewayRegistered')?.status).toBe('True');
  }, 180_000);
});
