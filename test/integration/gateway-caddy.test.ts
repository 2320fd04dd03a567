import { randomUUID } from 'node:crypto';
import { CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import http from 'node:http';
import net from 'node:net';
import { CaddyDriver } from '../../activities/gateway/caddy-driver.js';
import { trackServerName } from '../../activities/gateway/caddy-routes.js';
import { request } from '../../activities/gateway/http.js';
import { createActivities } from '../../activities/index.js';
import { KubeClient } from '../../activities/kube-client.js';
import { defaultBuildOptions } from '../../src/core/desired-state.js';
import { freePort } from '../../tools/local-stack/processes.js';
import { canaryShare, canaryUpkeep, liveCanaryOf } from '../../src/core/canary-state.js';
import { addTraffic, revisionName } from '../../src/core/rollout.js';
import { delegatedPrefixesAnnotation, routeId, type RouteSpec } from '../../src/core/route-rules.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  operatorKubeconfig,
  startOperatorProcess,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let caddy: CaddyProcess;
let operator: OperatorProcess;
let ns: string;

beforeAll(async () => {
  installCrds(stack);
  caddy = await CaddyProcess.create(stack);
  ns = k.createNamespace('caddy');
  // The collision tests publish outside /models/<namespace>/, as an administrator may allow.
  k.kubectl('annotate', 'namespace', ns, `${delegatedPrefixesAnnotation}=/shared,/racing`);
  operator = startOperatorProcess(
    stack,
    {
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
      ...caddy.operatorEnv,
      // The janitor compares the gateway with the models this often.
      MMO_GATEWAY_SWEEP_SECONDS: '3',
    },
    'caddy',
  );
});

afterAll(async () => {
  await operator?.stop();
  await caddy?.stop();
});

/** The activities themselves, as the operator's ServiceAccount, publishing on this Caddy. */
function activitiesOnCaddy() {
  const kc = new KubeConfig();
  kc.loadFromFile(operatorKubeconfig(stack));
  const driver = new CaddyDriver({
    adminURL: caddy.adminURL,
    server: 'machinemodels',
    listen: `127.0.0.1:${caddy.httpPort}`,
    publicURL: caddy.publicURL,
  });
  return createActivities({ kube: new KubeClient(kc), build: defaultBuildOptions, gateway: driver });
}

const gatewayCondition = (name: string) => conditionOf(k.get('machinemodel', ns, name), 'GatewayRegistered');

async function registered(name: string) {
  return eventually<any>(
    `${name} registered`,
    () => {
      const mm = k.get('machinemodel', ns, name);
      return mm?.status?.phase === 'Ready' && gatewayCondition(name)?.status === 'True' ? mm : undefined;
    },
    60_000,
  );
}

describe('publication on a real Caddy through its admin API', () => {
  it('registers a Ready model: route with the right path and upstream, requests reach it', async () => {
    k.apply(machineModel(ns, 'published'));
    const mm = await registered('published');
    const prefix = `/models/${ns}/published`;
    expect(mm.status.gatewayURL).toBe(`${caddy.publicURL}${prefix}`);
    const route = (await caddy.routes()).find(
      (r) => r['@id'] === routeId({ namespace: ns, name: 'published', uid: mm.metadata.uid }),
    );
    expect(route?.match?.[0]?.path).toEqual([prefix, `${prefix}/*`]);
    const proxy = route?.handle?.find((h) => h.handler === 'reverse_proxy');
    expect(proxy?.upstreams).toEqual([{ dial: `published.${ns}.svc.cluster.local:80` }]);

    // The upstream is an in-cluster name the host cannot resolve: Caddy answers 502 for the model's
    // path, and its catch-all 404 for paths no model owns.
    const viaModel = await fetch(`${caddy.publicURL}${prefix}/v1/predict`);
    expect(viaModel.status).toBe(502);
    const unknown = await fetch(`${caddy.publicURL}/models/${ns}/nobody/v1/predict`);
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain('no model is published at this path');
  });

  it('unregisters on deletion before the finalizer goes', async () => {
    k.apply(machineModel(ns, 'short'));
    const mm = await registered('short');
    const id = routeId({ namespace: ns, name: 'short', uid: mm.metadata.uid });
    k.kubectl('-n', ns, 'delete', 'mm', 'short', '--wait=true', '--timeout=60s');
    expect((await caddy.routes()).some((r) => r['@id'] === id)).toBe(false);
    expect((await fetch(`${caddy.publicURL}/models/${ns}/short/x`)).status).toBe(404);
  });

  it('keeps the finalizer while Caddy is down and completes deletion when it returns', async () => {
    k.apply(machineModel(ns, 'outage'));
    const mm = await registered('outage');
    await caddy.stop();
    k.kubectl('-n', ns, 'delete', 'mm', 'outage', '--wait=false');
    const pending = await eventually(
      'UnregisterPending',
      () => {
        const c = gatewayCondition('outage');
        return c?.reason === 'UnregisterPending' ? c : undefined;
      },
      60_000,
    );
    expect(pending.message).toMatch(/unreachable/);
    expect(k.get('machinemodel', ns, 'outage').metadata.finalizers).toContain('stable.example.com/cleanup');
    const events = k
      .list('events', ns)
      .filter((e) => e.involvedObject.name === 'outage')
      .map((e) => e.reason);
    expect(events).toContain('GatewayUnavailable');

    await caddy.start();
    const back = Date.now();
    await eventually(
      'deletion completed',
      () => (k.get('machinemodel', ns, 'outage') === undefined ? true : undefined),
      90_000,
    );
    console.log(`deletion completed ${((Date.now() - back) / 1000).toFixed(1)}s after Caddy came back`);
    const id = routeId({ namespace: ns, name: 'outage', uid: mm.metadata.uid });
    expect((await caddy.routes()).some((r) => r['@id'] === id)).toBe(false);
  });

  it("refuses a path prefix that collides with another model's", async () => {
    k.apply(machineModel(ns, 'owner-a', { gateway: { pathPrefix: '/shared' } }));
    await registered('owner-a');
    k.apply(machineModel(ns, 'thief-b', { gateway: { pathPrefix: '/shared/sub' } }));
    const c = await eventually(
      'PathConflict',
      () => {
        const cond = gatewayCondition('thief-b');
        return cond?.reason === 'PathConflict' ? cond : undefined;
      },
      60_000,
    );
    expect(c.message).toContain(`MachineModel ${ns}/owner-a`);
    const prefixes = (await caddy.routes()).map((r) => r.match?.[0]?.path?.[0]);
    expect(prefixes).toContain('/shared');
    expect(prefixes).not.toContain('/shared/sub');
    expect(k.get('machinemodel', ns, 'thief-b').status.phase).toBe('Ready');

    // Once the holder is gone, the drift check wakes the refused model and it is published.
    k.kubectl('-n', ns, 'delete', 'mm', 'owner-a', '--wait=true', '--timeout=60s');
    await registered('thief-b');
    expect((await caddy.routes()).map((r) => r.match?.[0]?.path?.[0])).toContain('/shared/sub');
  });

  it('settles two models that publish one prefix at the same instant on the older one', async () => {
    // The activities themselves, against this Caddy and the real apiserver, in a namespace no operator
    // watches: both registrations run concurrently, so both may pass the conflict check before either writes.
    const racing = k.createNamespace('caddy-race');
    k.kubectl('annotate', 'namespace', racing, `${delegatedPrefixesAnnotation}=/racing`);
    const acts = activitiesOnCaddy();
    const spec = {
      image: 'registry.example.com/m:1',
      modelPath: '/m',
      resources: { cpu: '100m', memory: '128Mi' },
      gateway: { pathPrefix: '/racing' },
    };
    k.apply(machineModel(racing, 'elder', spec));
    await sleep(1_100); // creationTimestamp has one-second precision
    k.apply(machineModel(racing, 'junior', spec));
    const snapshot = async (name: string) => (await acts.readModel({ namespace: racing, name }))!;
    const [elder, junior] = [await snapshot('elder'), await snapshot('junior')];
    const routesOn = async (prefix: string) =>
      (await caddy.routes()).filter((r) => r.match?.[0]?.path?.[0] === prefix).map((r) => r['@id']);

    let raced = 0;
    for (let round = 0; round < 5; round++) {
      const [a, b] = await Promise.all([acts.registerRoute(elder), acts.registerRoute(junior)]);
      // This suite's own janitor may remove a losing route first; either way, the older model wins a tie.
      const { collisions } = await acts.inspectGateway();
      for (const r of collisions) await acts.removeCollidingRoute(r);
      if (collisions.length > 0 || b.condition?.message.includes('at the same time')) raced++;
      expect(a.condition?.message ?? '').not.toContain('at the same time');
      // First come, first served: the elder is refused only when junior's route was in before it looked.
      const holder = a.registered ? elder : junior;
      expect(await routesOn('/racing')).toEqual([routeId(holder.ref)]);
      await acts.unregisterRoute(elder.ref);
      await acts.unregisterRoute(junior.ref);
    }
    console.log(`gateway race: ${raced} of 5 concurrent registrations passed both checks before either wrote`);
    expect(raced).toBeGreaterThan(0);
  });

  it("after delete and recreate of the same name, only the new object's route exists", async () => {
    k.apply(machineModel(ns, 'again'));
    const old = await registered('again');
    k.kubectl('-n', ns, 'delete', 'mm', 'again', '--wait=true', '--timeout=60s');
    k.apply(machineModel(ns, 'again'));
    const reborn = await eventually<any>(
      'recreated and registered',
      () => {
        const mm = k.get('machinemodel', ns, 'again');
        return mm && mm.metadata.uid !== old.metadata.uid && gatewayCondition('again')?.status === 'True'
          ? mm
          : undefined;
      },
      60_000,
    );
    const ids = (await caddy.routes()).map((r) => r['@id']);
    expect(ids).toContain(routeId({ namespace: ns, name: 'again', uid: reborn.metadata.uid }));
    expect(ids).not.toContain(routeId({ namespace: ns, name: 'again', uid: old.metadata.uid }));
  });

  it('removes a route whose MachineModel no longer exists (the drift check)', async () => {
    const orphan = routeId({ namespace: ns, name: 'ghost', uid: randomUUID() });
    const put = await request('PUT', `${caddy.adminURL}/config/apps/http/servers/machinemodels/routes/0`, {
      '@id': orphan,
      match: [{ path: ['/ghost', '/ghost/*'] }],
      handle: [{ handler: 'static_response', body: 'boo' }],
    });
    expect(put.status).toBe(200);
    await eventually(
      'orphan removed',
      async () => ((await caddy.routes()).some((r) => r['@id'] === orphan) ? undefined : true),
      60_000,
    );
  });
});

describe("the canary's one writer, the model's round", () => {
  it("applies no canary for a model being deleted, nor of a revision that is not the spec's (bug 4: a deleted model's route came back)", async () => {
    // The activity itself, in a namespace no operator watches, on a model held by its finalizer.
    const held = k.createNamespace('caddy-held');
    const acts = activitiesOnCaddy();
    const rollout = { strategy: 'Canary' as const, steps: [{ weight: 50 }] };
    k.apply(machineModel(held, 'going', { rollout }, { finalizers: ['stable.example.com/cleanup'] }));
    const mm = await eventually<any>('created', () => k.get('machinemodel', held, 'going'));
    const ref = { namespace: held, name: 'going', uid: mm.metadata.uid as string };
    const activity = new MockActivityEnvironment();
    const forged = { revision: { image: 'evil.example/miner:1', modelPath: '/m' }, replicas: 1 };
    // Refused, not retried: a stale request would be asked for ever.
    expect(await activity.run(acts.syncCanary, { ref, canary: forged })).toEqual({
      changes: [],
      refused: expect.stringMatching(/not the spec's/),
    });
    k.kubectl('-n', held, 'delete', 'mm', 'going', '--wait=false');
    await eventually('deletion under way', () => k.get('machinemodel', held, 'going')?.metadata?.deletionTimestamp);
    const revision = { image: mm.spec.image as string, modelPath: mm.spec.modelPath as string };
    expect(await activity.run(acts.syncCanary, { ref, canary: { revision, replicas: 1 } })).toEqual({
      changes: [],
      refused: expect.stringMatching(/gone or deleting/),
    });
    expect(k.get('deployment', held, 'going-canary')).toBeUndefined();
    expect((await caddy.routes()).some((r) => r['@id'] === routeId(ref))).toBe(false);
    k.kubectl('-n', held, 'patch', 'mm', 'going', '--type=merge', '-p', '{"metadata":{"finalizers":null}}');
  });

  it('relabels the one canary for a new revision, which the rollout sees ready only on its own Pods, and removes it', async () => {
    const kept = k.createNamespace('caddy-share');
    const kc = new KubeConfig();
    kc.loadFromFile(operatorKubeconfig(stack));
    const kube = new KubeClient(kc);
    const acts = createActivities({ kube, build: defaultBuildOptions });
    const rollout = { strategy: 'Canary' as const, steps: [{ weight: 50 }] };
    const v = (n: number) => ({ image: `registry.example/m:${n}`, modelPath: '/m' });
    k.apply(machineModel(kept, 'shared', { ...v(2), rollout }));
    const mm = await eventually<any>('created', () => k.get('machinemodel', kept, 'shared'));
    const ref = { namespace: kept, name: 'shared', uid: mm.metadata.uid as string };
    const live = () => liveCanaryOf(k.get('deployment', kept, 'shared-canary')!);
    await acts.syncCanary({ ref, canary: { revision: v(2), replicas: 1 } });
    await eventually('v2 ready', () => (live().readyReplicas === 1 ? true : undefined), 60_000);
    k.apply(machineModel(kept, 'shared', { ...v(3), rollout }));
    await eventually('v3 read', async () =>
      (await kube.getModel(kept, 'shared'))?.spec.image === v(3).image ? true : undefined,
    );
    await acts.syncCanary({ ref, canary: { revision: v(3), replicas: 1 } });
    expect(live().revision).toBe(revisionName(v(3)));
    // v2's rollout sees none of it; v3's sees it once its own Pod is ready.
    expect(await acts.canaryHealth({ ref, revision: v(2), replicas: 1 })).toMatchObject({ readyReplicas: 0 });
    await eventually(
      'v3 ready on its own Pod',
      async () =>
        (await acts.canaryHealth({ ref, revision: v(3), replicas: 1 })).readyReplicas === 1 ? true : undefined,
      60_000,
    );
    expect(k.get('deployment', kept, 'shared-canary')?.spec.template.spec.containers[0].image).toBe(v(3).image);
    expect(await acts.syncCanary({ ref })).toEqual({
      changes: ['canary Service removed', 'canary Deployment removed'],
    });
    expect(k.get('deployment', kept, 'shared-canary')).toBeUndefined();
  });

  it('gives no share to a canary edited in place with its labels and size kept, and the next round puts it back', async () => {
    const own = k.createNamespace('caddy-edited');
    const kc = new KubeConfig();
    kc.loadFromFile(operatorKubeconfig(stack));
    const acts = createActivities({ kube: new KubeClient(kc), build: defaultBuildOptions });
    const rollout = { strategy: 'Canary' as const, steps: [{ weight: 50 }] };
    const v2 = { image: 'registry.example/m:2', modelPath: '/m' };
    k.apply(machineModel(own, 'edited', { ...v2, rollout }));
    const mm = await eventually<any>('created', () => k.get('machinemodel', own, 'edited'));
    const ref = { namespace: own, name: 'edited', uid: mm.metadata.uid as string };
    // In an activity's context: a canary made again is logged as the activity's.
    const sync = () =>
      new MockActivityEnvironment().run(acts.syncCanary, {
        ref,
        canary: { revision: v2, replicas: 1 },
      }) as ReturnType<typeof acts.syncCanary>;
    const round = async () => (await acts.applyChildren((await acts.readModel(ref))!)).liveCanary;
    const running = {
      revision: v2,
      plan: rollout,
      stableReplicas: 1,
      want: { step: 0, replicas: 1, weight: 50, seq: 1 },
    };
    await sync();
    const built = await eventually(
      'ready as built',
      async () => {
        const live = await round();
        return live?.readyReplicas === 1 ? live : undefined;
      },
      60_000,
    );
    expect(canaryShare(running, built)).toBe(50);
    // The tenant edits the canary in place, as kubectl lets it in its own namespace.
    const edit = (kind: string, type: 'json' | 'merge', patch: unknown) =>
      k.kubectl('-n', own, 'patch', kind, 'edited-canary', `--type=${type}`, '-p', JSON.stringify(patch));
    // Another image under the canary's name and labels.
    edit('deployment', 'json', [
      { op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'registry.example/miner:1' },
    ]);
    await eventually(
      'the edited Pod ready',
      () => {
        const d = k.get('deployment', own, 'edited-canary');
        return d.spec.template.spec.containers[0].image.includes('miner') && liveCanaryOf(d).readyReplicas === 1
          ? true
          : undefined;
      },
      60_000,
    );
    const edited = await round();
    expect(edited).toEqual({ revision: revisionName(v2), replicas: 1, readyReplicas: 0, edited: true });
    expect(canaryShare(running, edited)).toBe(0);
    expect(canaryUpkeep(running, edited, false)).toEqual({ do: 'apply', replicas: 1 });
    expect((await sync()).changes).toEqual([`canary Deployment: 1 × ${v2.image}`]);
    expect(k.get('deployment', own, 'edited-canary').spec.template.spec.containers[0].image).toBe(v2.image);
    const asBuiltAgain = async (what: string) =>
      eventually(
        what,
        async () => {
          const live = await round();
          return live?.readyReplicas === 1 && !live.edited ? live : undefined;
        },
        60_000,
      );
    expect(canaryShare(running, await asBuiltAgain('as built and ready again'))).toBe(50);

    // A command beside the fields the operator sets: an apply would keep it, so the canary is made again.
    const uid = k.get('deployment', own, 'edited-canary').metadata.uid;
    edit('deployment', 'json', [
      { op: 'add', path: '/spec/template/spec/containers/0/command', value: ['sh', '-c', 'mine'] },
    ]);
    await eventually('the command seen', async () => ((await round())?.edited ? true : undefined));
    expect((await sync()).changes).toEqual([
      'canary Deployment made again (it ran model.command)',
      `canary Deployment: 1 × ${v2.image}`,
    ]);
    const remade = k.get('deployment', own, 'edited-canary');
    expect(remade.metadata.uid).not.toBe(uid);
    expect(remade.spec.template.spec.containers[0].command).toBeUndefined();
    await asBuiltAgain('made again, ready');

    // The canary Service narrowed to Pods of the tenant's choosing: made again too.
    edit('service', 'merge', { spec: { selector: { mine: 'yes' } } });
    await eventually('the narrowed Service seen', async () => ((await round())?.edited ? true : undefined));
    expect((await sync()).changes).toEqual(['canary Service made again (its selector was narrowed)']);
    expect(k.get('service', own, 'edited-canary').spec.selector.mine).toBeUndefined();
    await asBuiltAgain('its Service as built again');
  });
});

describe("a canary's share of the requests, counted on Caddy", () => {
  /** A plain HTTP server on loopback that answers every request with `status` and its own name. */
  async function backend(name: string, status: number) {
    const server = http.createServer((_req, res) => res.writeHead(status).end(name));
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return { server, backend: { name, namespace: 'none', port, host: '127.0.0.1' } };
  }

  it("counts the canary's requests and 5xx apart from the stable revision's, also across config reloads", async () => {
    const stable = await backend('stable', 200);
    const canary = await backend('canary', 503);
    const driver = new CaddyDriver({
      adminURL: caddy.adminURL,
      server: 'machinemodels',
      listen: caddy.operatorEnv.MMO_CADDY_LISTEN!,
      publicURL: caddy.publicURL,
    });
    // Not a model's route id: the operator's janitor leaves it alone.
    const route: RouteSpec = {
      id: `canary-counting-${randomUUID().slice(0, 8)}`,
      namespace: 'none',
      name: 'counted',
      uid: 'u',
      pathPrefix: `/counted-${randomUUID().slice(0, 8)}`,
      hostnames: [],
      service: stable.backend,
      canary: { service: canary.backend, weight: 20 },
      protocol: 'http',
    };
    const send = async (n: number) => {
      const seen: Record<string, number> = {};
      for (let i = 0; i < n; i++) {
        const res = await request('GET', `${caddy.publicURL}${route.pathPrefix}/predict`);
        seen[res.body] = (seen[res.body] ?? 0) + 1;
      }
      return seen;
    };
    try {
      expect(await driver.put(route)).toBe(true);
      const first = await driver.traffic(route.id);
      // Caddy's weighted round robin: 20 of every 100 requests, one after another.
      expect(await send(100)).toEqual({ stable: 80, canary: 20 });
      const second = await driver.traffic(route.id);
      let seen = addTraffic(addTraffic({ requests: 0, errors: 0 }, undefined, first), first, second);
      expect(seen).toEqual({ requests: 20, errors: 20 });

      // Any config change reloads Caddy and starts its counters again: counted from the reload.
      await driver.put({ ...route, canary: { ...route.canary!, weight: 50 } });
      expect(await send(100)).toEqual({ stable: 50, canary: 50 });
      const third = await driver.traffic(route.id);
      expect(third.countedSince).not.toBe(second.countedSince);
      seen = addTraffic(seen, second, third);
      expect(seen).toEqual({ requests: 70, errors: 70 });

      // Without the canary, its servers go with the split.
      expect(await driver.put({ ...route, canary: undefined })).toBe(true);
      expect(await send(5)).toEqual({ stable: 5 });
      const servers = await request('GET', `${caddy.adminURL}/config/apps/http/servers`);
      expect(Object.keys(JSON.parse(servers.body) as object)).not.toContain(trackServerName(route.id, 'canary'));
    } finally {
      await driver.remove(route.id, { namespace: 'none', name: 'counted', uid: 'u' });
      stable.server.close();
      canary.server.close();
    }
  });
});

describe('bad gateway configuration', () => {
  // A shard's worker that stops cancels its activities, and the shard's next owner may publish at once:
  // an admin request still waiting on its 10 s deadline would be a second writer. The admin API here
  // has gone silent: it accepts connections and never answers.
  it("ends an activity's admin request when the activity is cancelled, and sends none after", async () => {
    let connections = 0;
    const silent = net.createServer((socket) => {
      connections++;
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const driver = new CaddyDriver({
      adminURL: `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`,
      server: 'machinemodels',
      listen: caddy.operatorEnv.MMO_CADDY_LISTEN!,
      publicURL: caddy.publicURL,
    });
    const env = new MockActivityEnvironment();
    const outcomes: unknown[] = [];
    let connectionsAfter: number | undefined;
    try {
      await env
        .run(async () => {
          const pending = driver.list().catch((err: unknown) => err);
          await eventually('the request sent', () => (connections > 0 ? true : undefined), 5_000);
          env.cancel('WORKER_SHUTDOWN');
          outcomes.push(await pending);
          const before = connections;
          outcomes.push(await driver.list().catch((err: unknown) => err));
          connectionsAfter = connections - before;
        })
        .catch(() => undefined);
    } finally {
      silent.close();
    }
    expect(outcomes).toHaveLength(2);
    // The second was refused before it was sent.
    expect(connectionsAfter).toBe(0);
    for (const outcome of outcomes) expect(outcome).toBeInstanceOf(CancelledFailure);
  });

  it('says so in a condition when the admin API is unreachable, and the model still serves', async () => {
    const ns2 = k.createNamespace('caddy-down');
    const closed = await freePort();
    const op = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns2,
        MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
        MMO_GATEWAY: 'caddy',
        MMO_CADDY_ADMIN: `http://127.0.0.1:${closed}`,
      },
      'caddy-unreachable',
    );
    try {
      k.apply(machineModel(ns2, 'lonely'));
      const c = await eventually<any>(
        'GatewayUnavailable',
        () => {
          const mm = k.get('machinemodel', ns2, 'lonely');
          const cond = conditionOf(mm, 'GatewayRegistered');
          return mm?.status?.phase === 'Ready' && cond?.reason === 'GatewayUnavailable' ? cond : undefined;
        },
        60_000,
      );
      expect(c.message).toContain(`http://127.0.0.1:${closed}`);
      expect(c.message).toMatch(/unreachable/);
      expect(op.child.exitCode).toBeNull();
    } finally {
      await op.stop();
    }
  });
});

// Last: after an empty restart the sweeps republish route after route, each a config reload that
// restarts Caddy's counters and its round robin (the canary test above counts exactly).
describe('a gateway that forgets its routes', () => {
  it('republishes the routes after Caddy restarts with an empty config', async () => {
    k.apply(machineModel(ns, 'comeback'));
    const mm = await registered('comeback');
    const id = routeId({ namespace: ns, name: 'comeback', uid: mm.metadata.uid });
    await caddy.stop();
    await caddy.start({ empty: true });
    expect((await caddy.routes()).some((r) => r['@id'] === id)).toBe(false);
    await eventually(
      'route republished',
      async () => ((await caddy.routes()).some((r) => r['@id'] === id) ? true : undefined),
      60_000,
    );
  });
});

describe('a gateway killed with many routes', () => {
  // Enough routes that a rebuild takes many sweeps; 200 added a minute to the suite and showed no more.
  const count = 100;
  const names = Array.from({ length: count }, (_, i) => `fleet-${i}`);

  /** Seconds from `since` until Caddy holds a route for every one of the models. */
  async function secondsUntilAllRoutes(since: number): Promise<number> {
    await eventually(
      `all ${count} routes on Caddy`,
      async () => {
        const ids = new Set((await caddy.routes()).map((r) => r['@id']));
        return names.every((n) => [...ids].some((id) => id?.startsWith(`machinemodel.${ns}.${n}.`))) ? true : undefined;
      },
      240_000,
    );
    return (Date.now() - since) / 1000;
  }

  it(`serves all ${count} routes again as it comes back from a kill -9; one that lost its state is rebuilt by the sweeps`, async () => {
    k.apply(names.map((n) => machineModel(ns, n)));
    await eventually(
      `${count} models published`,
      () => {
        const published = k
          .list('machinemodels', ns)
          .filter((m) => names.includes(m.metadata.name) && conditionOf(m, 'GatewayRegistered')?.status === 'True');
        return published.length === count ? true : undefined;
      },
      240_000,
    );
    await caddy.stop('SIGKILL');
    let since = Date.now();
    await caddy.start();
    const resumed = await secondsUntilAllRoutes(since);
    // The same gateway with nothing: a Pod that came up on another node, as every restart was before --resume.
    await caddy.stop('SIGKILL');
    since = Date.now();
    await caddy.start({ empty: true });
    const rebuilt = await secondsUntilAllRoutes(since);
    console.log(
      `${count} routes back on Caddy: ${resumed.toFixed(1)} s after a kill -9 (--resume), ${rebuilt.toFixed(1)} s after a restart with no state (the janitor's sweeps, every 3 s)`,
    );
    // The request of one model reaches its route (502: the in-cluster upstream), not the catch-all (404).
    expect((await fetch(`${caddy.publicURL}/models/${ns}/fleet-7/v1/predict`)).status).toBe(502);
    k.kubectl('-n', ns, 'delete', 'machinemodels', ...names, '--wait=true', '--timeout=180s');
  }, 720_000);
});
