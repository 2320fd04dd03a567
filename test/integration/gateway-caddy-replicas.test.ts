// Caddy on two replicas, as the in-cluster install runs it: every route on each, and a replica that
// comes back with nothing gets every route from the other in one load before it serves. (Canary
// splits are not tried here: their servers listen on abstract sockets, one set per Pod's network, so
// two Caddies on one host collide; the per-replica counting is src/core/rollout.ts's addTraffic.)
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WorkerStop } from '../../activities/cancellation.js';
import type { CaddyDriver } from '../../activities/gateway/caddy-driver.js';
import { CaddyFleet } from '../../activities/gateway/caddy-fleet.js';
import { GatewayUnavailable } from '../../activities/gateway/driver.js';
import { request } from '../../activities/gateway/http.js';
import { workflowIdFor } from '../../src/core/api.js';
import { routeId, type RouteSpec } from '../../src/core/route-rules.js';
import { janitorWorkflowId } from '../../workflows/definitions.js';
import { freePort } from '../../tools/local-stack/processes.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
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
let a: CaddyProcess;
let b: CaddyProcess;
let upstream: http.Server;
let upstreamPort: number;

/** Each replica listens where its own environment says: one config serves both on one host. */
const listen = '{env.MMO_GATEWAY_LISTEN}';

beforeAll(async () => {
  [a, b] = [await CaddyProcess.create(stack), await CaddyProcess.create(stack)];
  upstream = http.createServer((req, res) => res.writeHead(200).end(`model ${req.url}`));
  upstreamPort = await freePort();
  await new Promise<void>((resolve) => upstream.listen(upstreamPort, '127.0.0.1', resolve));
});

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  upstream?.close();
});

/**
 * Three attempts a second apart on GatewayUnavailable, as a gateway step's retry policy gives them: Caddy
 * resets admin requests while it applies a load, and the case before leaves one applying on purpose.
 */
async function asTheStepRetries<T>(op: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (!(err instanceof GatewayUnavailable) || attempt === 3) throw err;
      await sleep(1_000);
    }
  }
}

const fleetOf = (...replicas: CaddyProcess[]) =>
  new CaddyFleet({
    adminURL: replicas.map((r) => r.adminURL).join(','),
    server: 'machinemodels',
    listen,
    publicURL: replicas[0]!.publicURL,
  });

const routeFor = (name: string): RouteSpec => ({
  id: routeId({ namespace: 'replicas', name, uid: 'u' }),
  namespace: 'replicas',
  name,
  uid: 'u',
  pathPrefix: `/models/replicas/${name}`,
  hostnames: [],
  service: { name, namespace: 'replicas', host: '127.0.0.1', port: upstreamPort },
  protocol: 'http',
});

const answers = async (replica: CaddyProcess, name: string) =>
  (await request('GET', `${replica.publicURL}/models/replicas/${name}/v1/predict`)).status === 200;

/** Whether anything accepts connections at the replica's models listener. */
const listening = (replica: CaddyProcess) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(replica.httpPort, '127.0.0.1');
    socket.once('connect', () => resolve(socket.destroy() === undefined));
    socket.once('error', () => resolve(false));
  });

describe('Caddy on two replicas', () => {
  const count = 200;
  const names = Array.from({ length: count }, (_, i) => `m-${i}`);

  it(`publishes every route on each replica, and a replica that restarts empty serves all ${count} at once, from one load`, async () => {
    const fleet = fleetOf(a, b);
    for (const n of names) await fleet.put(routeFor(n));
    expect(await answers(a, 'm-7')).toBe(true);
    expect(await answers(b, 'm-199')).toBe(true);
    expect((await fleet.list()).filter((r) => r.incomplete)).toEqual([]);

    // A new Pod: nothing on its models listener until the operator gives it a config.
    await b.stop('SIGKILL');
    await b.start({ empty: true });
    expect(await listening(b)).toBe(false);
    const since = Date.now();
    // Any admin call of the operator's (here the sweep's listing) brings it every route first.
    const routes = await fleet.list();
    const seconds = (Date.now() - since) / 1000;
    expect(routes.filter((r) => r.incomplete)).toEqual([]);
    const served = await Promise.all(names.map((n) => answers(b, n)));
    expect(served.filter((ok) => !ok)).toEqual([]);
    console.log(
      `${count} routes on a replica that restarted empty: ${seconds.toFixed(2)} s (one load from the other replica)`,
    );
  }, 240_000);

  it('lists a route one replica lost as incomplete, and a put gives it back', async () => {
    const fleet = fleetOf(a, b);
    const route = routeFor('m-3');
    await request('DELETE', `${b.adminURL}/id/${route.id}`);
    expect((await fleet.list()).find((r) => r.id === route.id)?.incomplete).toBe(true);
    expect(await fleet.put(route)).toBe(true);
    expect(await answers(b, 'm-3')).toBe(true);
    expect((await fleet.list()).find((r) => r.id === route.id)?.incomplete).toBeUndefined();
  });

  it('lists a route held otherwise on one replica as incomplete (a stale copy)', async () => {
    const fleet = fleetOf(a, b);
    const route = routeFor('m-4');
    // Replica b holds an older form of the route: another upstream port.
    const stale = { ...route, service: { ...route.service, port: 1 } };
    await new CaddyFleet({ adminURL: b.adminURL, server: 'machinemodels', listen, publicURL: b.publicURL }).put(stale);
    expect((await fleet.list()).find((r) => r.id === route.id)?.incomplete).toBe(true);
    await fleet.put(route);
    expect((await fleet.list()).find((r) => r.id === route.id)?.incomplete).toBeUndefined();
    expect(await answers(b, 'm-4')).toBe(true);
  });

  it('goes on with the replicas that answer when one does not, and gives it every route when it is back', async () => {
    const fleet = new CaddyFleet(
      { adminURL: `${a.adminURL},${b.adminURL}`, server: 'machinemodels', listen, publicURL: a.publicURL },
      undefined,
      undefined,
      1,
    );
    await b.stop('SIGKILL');
    // Its check fails: left out, and the route published on the replica that answers.
    expect(await fleet.put(routeFor('late'))).toBe(true);
    expect(await answers(a, 'late')).toBe(true);
    // Back with its autosaved config, which misses what was written meanwhile: once its time left out
    // is over, the next call gives it the whole config of a replica that answered throughout.
    await b.start();
    expect(await answers(b, 'late')).toBe(false);
    await sleep(1_100);
    expect((await fleet.list()).filter((r) => r.incomplete)).toEqual([]);
    expect(await answers(b, 'late')).toBe(true);
    await fleet.remove(routeFor('late').id, { namespace: 'replicas', name: 'late', uid: 'u' });
  });

  // Seen in review: several activities share one load of a stale replica, and the load ends with the
  // cancellation of the activity that started it (its shard's worker stopping).
  it("goes on with a replica's load when the activity that started it is cancelled", async () => {
    const fleet = fleetOf(a, b);
    await fleet.put(routeFor('shared-load'));
    // Replica b loses its models' server: the next call of each activity loads it from a.
    expect((await request('DELETE', `${b.adminURL}/config/apps/http/servers/machinemodels`)).status).toBe(200);
    // The load is held until both activities wait on it; everything it sends is real.
    const driverOf = (replica: CaddyProcess) =>
      (fleet as unknown as { driver(address: string): CaddyDriver }).driver(replica.adminURL.replace(/\/+$/, ''));
    const stale = driverOf(b);
    const load = stale.loadApps.bind(stale);
    // Each activity checks both replicas before it loads the stale one.
    let checked = 0;
    for (const driver of [driverOf(a), stale]) {
      const check = driver.hasServer.bind(driver);
      driver.hasServer = async () => check().finally(() => checked++);
    }
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    stale.loadApps = async (apps) => {
      await held;
      return load(apps);
    };
    const first = new WorkerStop();
    const firstRun = new MockActivityEnvironment({}, { interceptors: [first.interceptor] })
      .run(() => fleet.list())
      .catch((err: unknown) => err);
    await eventually('the first activity waits on the load', () => checked === 2);
    const secondRun = new MockActivityEnvironment({}, { interceptors: [new WorkerStop().interceptor] }).run(() =>
      fleet.list(),
    );
    await eventually('the second activity waits on the load', () => checked === 4);
    await new Promise((resolve) => setImmediate(resolve));
    // The stopped activity ends at once, without waiting for the load (still held) to end.
    first.stop();
    expect(await firstRun).toBeInstanceOf(CancelledFailure);
    release();
    const routes = (await secondRun) as Awaited<ReturnType<CaddyFleet['list']>>;
    expect(routes.find((r) => r.id === routeFor('shared-load').id)?.incomplete).toBeUndefined();
    expect(await answers(b, 'shared-load')).toBe(true);
    await fleet.remove(routeFor('shared-load').id, { namespace: 'replicas', name: 'shared-load', uid: 'u' });
  });

  it('removes a route from every replica', async () => {
    const fleet = fleetOf(a, b);
    for (const n of names)
      await asTheStepRetries(() => fleet.remove(routeFor(n).id, { namespace: 'replicas', name: n, uid: 'u' }));
    expect(await fleet.list()).toEqual([]);
    expect(await answers(a, 'm-1')).toBe(false);
    expect(await answers(b, 'm-1')).toBe(false);
  }, 120_000);
});

/** A JSON.stringify replacer that shows payload bytes as text, so a search finds what they hold. */
function readable(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  return raw instanceof Uint8Array ? Buffer.from(raw).toString('utf8') : value;
}

describe('the operator on two Caddy replicas', () => {
  let operator: OperatorProcess;
  let ns: string;
  const taskQueue = `mmo-${randomUUID()}`;
  // Credentials in an admin URL (Caddy ignores them): they must show nowhere the operator writes.
  const secret = `s3cret-${randomUUID()}`;
  const withCredentials = (url: string) => url.replace('://', `://mmo-admin:${secret}@`);

  beforeAll(() => {
    installCrds(stack);
    ns = k.createNamespace('caddy-replicas');
    operator = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns,
        MMO_TASK_QUEUE: taskQueue,
        MMO_GATEWAY: 'caddy',
        MMO_CADDY_ADMIN: `${withCredentials(a.adminURL)},${b.adminURL}`,
        MMO_CADDY_LISTEN: listen,
        MMO_GATEWAY_PUBLIC_URL: a.publicURL,
        MMO_GATEWAY_SWEEP_SECONDS: '3',
      },
      'caddy-replicas',
    );
  });

  afterAll(async () => {
    await operator?.stop();
  });

  it('publishes a model on both, its route is back on a replica that restarted empty by the next sweep, and an outage shows no admin credentials', async () => {
    k.apply(machineModel(ns, 'twice'));
    const mm = await eventually<any>(
      'twice registered',
      () => {
        const m = k.get('machinemodel', ns, 'twice');
        return conditionOf(m, 'GatewayRegistered')?.status === 'True' ? m : undefined;
      },
      60_000,
    );
    const id = routeId({ namespace: ns, name: 'twice', uid: mm.metadata.uid });
    const onBoth = async () =>
      (await a.routes()).some((r) => r['@id'] === id) && (await b.routes()).some((r) => r['@id'] === id);
    expect(await onBoth()).toBe(true);
    await a.stop('SIGKILL');
    await a.start({ empty: true });
    // A replica a sweep found down is left out for 30 s before it is given every route.
    await eventually('route back on the restarted replica', async () => ((await onBoth()) ? true : undefined), 60_000);
    expect(conditionOf(k.get('machinemodel', ns, 'twice'), 'GatewayRegistered')?.status).toBe('True');

    // Both down while a round publishes: the failure names the replicas, the one with credentials too.
    await Promise.all([a.stop('SIGKILL'), b.stop('SIGKILL')]);
    k.kubectl('patch', 'machinemodel', 'twice', '-n', ns, '--type=merge', '-p', '{"spec":{"replicas":2}}');
    const failed = await eventually(
      'GatewayRegistered Unknown: GatewayUnavailable',
      () => {
        const c = conditionOf(k.get('machinemodel', ns, 'twice'), 'GatewayRegistered');
        return c?.reason === 'GatewayUnavailable' ? c : undefined;
      },
      60_000,
    );
    expect(failed.message).toContain(new URL(a.adminURL).origin);
    expect(JSON.stringify(failed)).not.toContain(secret);
    await Promise.all([a.start({ empty: true }), b.start({ empty: true })]);
    // A replica that did not answer is left out for 30 s; the model's round retries within 30 s.
    await eventually('route back on both', async () => ((await onBoth()) ? true : undefined), 120_000);

    // Nowhere the operator writes holds the credentials: its log, the janitor's history and the model's,
    // the model's status, its Events.
    const client = await temporalClient(stack);
    // Every run of each, payloads (inputs, results, markers, signals) decoded.
    const histories = await Promise.all(
      [janitorWorkflowId(taskQueue), workflowIdFor(ns, 'twice')].map(async (id) => {
        const runs: string[] = [];
        for await (const run of client.workflow.list({ query: `WorkflowId = '${id}'` }))
          runs.push(JSON.stringify((await client.workflow.getHandle(id, run.runId).fetchHistory()).events, readable));
        return runs.join('\n');
      }),
    );
    await client.connection.close();
    expect(histories[1]).toContain(new URL(a.adminURL).origin);
    const log = readFileSync(operator.logFile, 'utf8');
    for (const written of [
      log,
      ...histories,
      k.kubectl('get', 'machinemodel', '-n', ns, '-o', 'yaml'),
      k.kubectl('get', 'events', '-n', ns, '-o', 'yaml'),
    ])
      expect(written).not.toContain(secret);
  }, 300_000);
});
