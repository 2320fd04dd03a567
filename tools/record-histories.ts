// Records the workflow histories that test/workflow/replay.test.ts replays, from real runs of the current
// code on a local stack of its own: each story is one model's life from `kubectl apply` to its deletion
// (the janitor's: a few sweeps). Run after a workflow change that needs new histories:
//   npm run histories:record [-- <story> ...]
// It writes test/histories/<story>.json (the Temporal CLI's `workflow show -o json` form) and stops
// everything it started.
import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { request } from '../activities/gateway/http.js';
import { routeId } from '../src/core/route-rules.js';
import { workflowIdFor, type RolloutSpec, type RolloutStatus } from '../src/core/api.js';
import { shardTaskQueue } from '../src/core/shards.js';
import { parseOperatorConfig } from '../src/process/config.js';
import { createLogger } from '../src/process/logger.js';
import { startOperator } from '../src/operator.js';
import { janitorWorkflowId } from '../workflows/definitions.js';
import { abortUpdate } from '../workflows/rollout-definitions.js';
import { CaddyProcess } from './local-stack/caddy-process.js';
import { cacheRoot } from './local-stack/components.js';
import { freePort } from './local-stack/processes.js';
import { down, up, type StackInfo } from './local-stack/stack.js';
// The recorder is test tooling: it drives the stack with the tests' own helpers.
import { conditionOf, kubectlFor } from '../test/support/cluster.js';
import { eventually } from '../test/support/eventually.js';
import { machineModel } from '../test/support/models.js';
import { installCrds } from '../test/support/operator-process.js';

const repo = (p: string) => fileURLToPath(new URL(`../${p}`, import.meta.url));
const taskQueue = 'machinemodel-operator';
const say = (line: string) => process.stdout.write(`${line}\n`);

interface World {
  stack: StackInfo;
  caddy: CaddyProcess;
  client: Client;
  k: ReturnType<typeof kubectlFor>;
}

const waitLong = 120_000;
const mm = (w: World, ns: string, name: string) => w.k.get('machinemodel', ns, name);
const phaseIs = (w: World, ns: string, name: string, phase: string) =>
  eventually(`${ns}/${name} ${phase}`, () => w.k.phaseOf(ns, name) === phase, waitLong);
const published = (w: World, ns: string, name: string) =>
  eventually(`${ns}/${name} published`, () => mm(w, ns, name)?.status?.gatewayURL as string | undefined, waitLong);

/** Moves the model to image v2 and waits until it is Ready on it. */
async function updateImage(w: World, ns: string, name: string): Promise<void> {
  const v2 = { spec: { image: 'registry.example.com/models/classifier:v2' } };
  w.k.kubectl('patch', 'mm', name, '-n', ns, '--type=merge', '-p', JSON.stringify(v2));
  await eventually(
    `${ns}/${name} on v2`,
    () => {
      const status = mm(w, ns, name)?.status;
      return status?.observedGeneration === 2 && status.phase === 'Ready';
    },
    waitLong,
  );
}

const canaryPlan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 25, pause: '10s' }] };

/** Moves a model with a rollout plan to v2 and waits until its canary takes its first share; the rollout's id. */
async function startRollout(w: World, ns: string, name: string): Promise<string> {
  const v2 = { spec: { image: 'registry.example.com/models/classifier:v2' } };
  w.k.kubectl('patch', 'mm', name, '-n', ns, '--type=merge', '-p', JSON.stringify(v2));
  return eventually(
    `${ns}/${name}'s canary serving`,
    () => {
      const r = mm(w, ns, name)?.status?.rollout as RolloutStatus | undefined;
      return r?.weight ? r.workflowId : undefined;
    },
    waitLong,
  );
}

/** Waits for the model's workflow run to close, then saves its history. */
async function save(w: World, story: string, workflowId: string, closes = true, runId?: string): Promise<void> {
  if (closes) {
    await eventually(
      `${workflowId} to close`,
      async () => (await w.client.workflow.getHandle(workflowId).describe()).status.name !== 'RUNNING',
      waitLong,
    );
  }
  const out = execFileSync(
    w.stack.binaries.temporal,
    [
      'workflow',
      'show',
      '--address',
      w.stack.temporalAddress,
      '--namespace',
      w.stack.temporalNamespace,
      '-w',
      workflowId,
      ...(runId ? ['-r', runId] : []),
      '-o',
      'json',
    ],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  const file = repo(`test/histories/${story}.json`);
  writeFileSync(file, out);
  say(
    `${story}: ${(JSON.parse(out) as { events: unknown[] }).events.length} events -> ${path.relative(repo(''), file)}`,
  );
}

/** Stories run by an operator without a gateway. */
const withoutGateway: Record<string, (w: World) => Promise<void>> = {
  // Two replicas to Ready without a finalizer, an image update, `kubectl scale` drift restored, deleted.
  async 'no-gateway-update-drift-delete'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'plain', { minReplicas: 2, maxReplicas: 2 }));
    await phaseIs(w, ns, 'plain', 'Ready');
    await updateImage(w, ns, 'plain');
    w.k.kubectl('scale', 'deployment', 'plain', '-n', ns, '--replicas=1');
    await eventually('the drift repaired', () => w.k.get('deployment', ns, 'plain')?.spec.replicas === 2, waitLong);
    await phaseIs(w, ns, 'plain', 'Ready');
    w.k.kubectl('delete', 'mm', 'plain', '-n', ns);
    await save(w, 'no-gateway-update-drift-delete', workflowIdFor(ns, 'plain'));
  },

  // Started by this operator, which has no shards (an install before them); a sharded operator
  // starts beside it, its sweep tells the workflow to move, and the run continues as new on shard 0's
  // queue (the `move-to-shard-queue` patch). The first run is the history.
  async 'moved-to-shard-queue'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'moving'));
    await phaseIs(w, ns, 'moving', 'Ready');
    const id = workflowIdFor(ns, 'moving');
    const first = (await w.client.workflow.getHandle(id).describe()).runId;
    w.k.kubectl('create', 'namespace', 'hist-leases');
    const sharded = startOperator(
      parseOperatorConfig([
        ...['--metrics-port', '0', '--drift-check', String(driftCheckSeconds), '--gateway', 'none'],
        ...['--shards', '1', '--lease-namespace', 'hist-leases', '--identity', 'recorder-sharded'],
      ]),
      createLogger(process.env.LOG_LEVEL ?? 'warn'),
    );
    try {
      await eventually(
        `${id} on shard 0's queue`,
        async () => (await w.client.workflow.getHandle(id).describe()).taskQueue === shardTaskQueue(taskQueue, 0),
        waitLong,
      );
      await save(w, 'moved-to-shard-queue', id, false, first);
      w.k.kubectl('delete', 'mm', 'moving', '-n', ns);
      await eventually(
        `${id} to close`,
        async () => (await w.client.workflow.getHandle(id).describe()).status.name !== 'RUNNING',
        waitLong,
      );
    } finally {
      await sharded.stop();
    }
  },
  // A Deployment of the model's name that someone else owns: Failed with NotOwned; then deleted.
  async 'deployment-not-owned'(w) {
    const ns = 'hist';
    w.k.kubectl('create', 'deployment', 'taken', '-n', ns, '--image=registry.example.com/other:v1');
    w.k.apply(machineModel(ns, 'taken', { endpointType: 'gRPC' }));
    await phaseIs(w, ns, 'taken', 'Failed');
    w.k.kubectl('delete', 'mm', 'taken', '-n', ns);
    await save(w, 'deployment-not-owned', workflowIdFor(ns, 'taken'));
    w.k.kubectl('delete', 'deployment', 'taken', '-n', ns);
  },
};

/** Stories run by an operator that publishes on Caddy. */
const onCaddy: Record<string, (w: World) => Promise<void>> = {
  // Published on Caddy; an image update; `mmctl resync --wait`; a drift-check round; Caddy stopped, then
  // deleted (UnregisterPending, the finalizer kept); Caddy back; the deletion completes.
  async 'caddy-update-resync-outage-delete'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'published'));
    await published(w, ns, 'published');
    await updateImage(w, ns, 'published');
    // Not execFileSync: the worker in this process must run the update while mmctl waits for its answer.
    await promisify(execFile)('npx', ['tsx', repo('src/mmctl.ts'), 'resync', `${ns}/published`, '--wait'], {
      env: process.env,
    });
    await sleep(driftCheckSeconds * 1000 + 3000);
    await w.caddy.stop();
    w.k.kubectl('delete', 'mm', 'published', '-n', ns, '--wait=false');
    await eventually(
      'UnregisterPending',
      () => conditionOf(mm(w, ns, 'published'), 'GatewayRegistered')?.reason === 'UnregisterPending',
      waitLong,
    );
    await sleep(8000);
    await w.caddy.start();
    await save(w, 'caddy-update-resync-outage-delete', workflowIdFor(ns, 'published'));
  },

  // Published, then its namespace deleted: the cleanup round removes the route and the finalizer.
  async 'namespace-deleted'(w) {
    const ns = 'hist-doomed';
    w.k.kubectl('create', 'namespace', ns);
    w.k.apply(machineModel(ns, 'doomed'));
    await published(w, ns, 'doomed');
    w.k.kubectl('delete', 'namespace', ns, '--wait=false');
    await save(w, 'namespace-deleted', workflowIdFor(ns, 'doomed'));
  },

  // A model with a rollout plan, Ready on v1; v2 as a canary at 25 % for 10 s, promoted; the canary
  // removed once v2 is stable; deleted. Both workflows' histories: the model's and the rollout's.
  async 'canary-promoted'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'canaried', { rollout: canaryPlan }));
    await published(w, ns, 'canaried');
    const rollout = await startRollout(w, ns, 'canaried');
    await eventually('promoted', () => mm(w, ns, 'canaried')?.status?.rollout?.phase === 'Promoted', waitLong);
    await eventually('the canary removed', () => !w.k.get('deployment', ns, 'canaried-canary'), waitLong);
    await save(w, 'canary-promoted-rollout', rollout);
    w.k.kubectl('delete', 'mm', 'canaried', '-n', ns, '--wait=false');
    await save(w, 'canary-promoted', workflowIdFor(ns, 'canaried'));
  },

  // The same, aborted by a person during the pause: all traffic back to v1, the canary removed, the
  // model Failed (RolloutFailed) on v1; then deleted.
  async 'canary-aborted'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'aborted', { rollout: { ...canaryPlan, steps: [{ weight: 25, pause: '10m' }] } }));
    await published(w, ns, 'aborted');
    const rollout = await startRollout(w, ns, 'aborted');
    await w.client.workflow.getHandle(rollout).executeUpdate(abortUpdate, { args: [{ by: 'record-histories' }] });
    await phaseIs(w, ns, 'aborted', 'Failed');
    await save(w, 'canary-aborted-rollout', rollout);
    w.k.kubectl('delete', 'mm', 'aborted', '-n', ns, '--wait=false');
    await save(w, 'canary-aborted', workflowIdFor(ns, 'aborted'));
  },

  // The janitor removes a route whose model never existed.
  async 'gateway-janitor-removes-orphan'(w) {
    const orphan = routeId({ namespace: 'hist', name: 'ghost', uid: randomUUID() });
    const admin = `${w.caddy.adminURL}/config/apps/http/servers/machinemodels/routes/0`;
    const put = await request('PUT', admin, {
      '@id': orphan,
      match: [{ path: ['/ghost', '/ghost/*'] }],
      handle: [{ handler: 'static_response', body: 'boo' }],
    });
    if (put.status !== 200) throw new Error(`Caddy refused the orphan route: ${put.status} ${put.body}`);
    await eventually(
      'the orphan removed',
      async () => (await request('GET', `${w.caddy.adminURL}/id/${orphan}`)).status === 404,
      waitLong,
    );
    await sleep(janitorSweepSeconds * 1000);
    await save(w, 'gateway-janitor-removes-orphan', janitorWorkflowId(taskQueue), false);
  },
};

/** Stories run by an operator whose drift checks are longer than a run may live (run-age-bound). */
const withLongDriftCheck: Record<string, (w: World) => Promise<void>> = {
  // Ready, then at once continued as new: its next wait (14 hours) would outlive a run's 12 hours.
  async 'idle-run-continues'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'idle'));
    await phaseIs(w, ns, 'idle', 'Ready');
    const id = workflowIdFor(ns, 'idle');
    const first = await eventually(
      `${id}'s first run continued as new`,
      async () => {
        for await (const run of w.client.workflow.list({
          query: `WorkflowId = '${id}' AND ExecutionStatus = 'ContinuedAsNew'`,
        }))
          return run.runId;
        return undefined;
      },
      waitLong,
    );
    await save(w, 'idle-run-continues', id, false, first);
    w.k.kubectl('delete', 'mm', 'idle', '-n', ns);
  },
};

/** Stories run by an operator whose models get 20 s to become ready (a canary too). */
const withShortDeadline: Record<string, (w: World) => Promise<void>> = {
  // Ready on v1; every node cordoned, so v2's canary cannot be scheduled: it is still not ready when
  // its 20 s are up, and the rollout fails the Ready check without sending it a request; then deleted.
  async 'canary-never-ready'(w) {
    const ns = 'hist';
    w.k.apply(machineModel(ns, 'stuck', { rollout: canaryPlan }));
    await phaseIs(w, ns, 'stuck', 'Ready');
    const nodes = w.k.kubectl('get', 'nodes', '-o', 'jsonpath={.items[*].metadata.name}').trim().split(/\s+/);
    w.k.kubectl('cordon', ...nodes);
    try {
      const v2 = { spec: { image: 'registry.example.com/models/classifier:v2' } };
      w.k.kubectl('patch', 'mm', 'stuck', '-n', ns, '--type=merge', '-p', JSON.stringify(v2));
      const rollout = await eventually(
        `${ns}/stuck's rollout rolled back`,
        () => {
          const r = mm(w, ns, 'stuck')?.status?.rollout as RolloutStatus | undefined;
          return r?.phase === 'RolledBack' ? r.workflowId : undefined;
        },
        waitLong,
      );
      await save(w, 'canary-never-ready-rollout', rollout);
    } finally {
      w.k.kubectl('uncordon', ...nodes);
    }
    w.k.kubectl('delete', 'mm', 'stuck', '-n', ns, '--wait=false');
    await save(w, 'canary-never-ready', workflowIdFor(ns, 'stuck'));
  },
};

const driftCheckSeconds = 10;
const janitorSweepSeconds = 5;

async function runStories(
  w: World,
  stories: Record<string, (w: World) => Promise<void>>,
  args: string[],
  wanted: string[],
) {
  const chosen = Object.entries(stories).filter(([name]) => wanted.length === 0 || wanted.includes(name));
  if (chosen.length === 0) return;
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn');
  const operator = startOperator(parseOperatorConfig(args), log);
  await Promise.race([operator.started, operator.done]);
  try {
    for (const [name, story] of chosen) {
      say(`recording ${name}`);
      await story(w);
    }
  } finally {
    await operator.stop();
  }
}

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const stateDir = path.join(cacheRoot, `record-histories-${process.pid}`);
  const stack = await up({ stateDir, ports: 'auto', fresh: true, realNode: false });
  const caddy = new CaddyProcess(stack.binaries.caddy, path.join(stateDir, 'logs'), await freePort(), await freePort());
  const connection = await Connection.connect({ address: stack.temporalAddress });
  try {
    Object.assign(process.env, {
      KUBECONFIG: stack.kubeconfig,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_NAMESPACE: stack.temporalNamespace,
    });
    const k = kubectlFor(stack);
    installCrds(stack);
    k.kubectl('create', 'namespace', 'hist');
    const w: World = { stack, caddy, client: new Client({ connection, namespace: stack.temporalNamespace }), k };
    const common = ['--metrics-port', '0', '--drift-check', String(driftCheckSeconds)];
    await runStories(w, withoutGateway, [...common, '--gateway', 'none'], wanted);
    await runStories(w, withShortDeadline, [...common, '--gateway', 'none', '--progress-deadline', '20'], wanted);
    await runStories(
      w,
      withLongDriftCheck,
      ['--metrics-port', '0', '--drift-check', '50000', '--gateway', 'none'],
      wanted,
    );
    await caddy.start();
    Object.assign(process.env, caddy.operatorEnv);
    await runStories(
      w,
      onCaddy,
      [...common, '--gateway', 'caddy', '--gateway-sweep', String(janitorSweepSeconds)],
      wanted,
    );
  } finally {
    await caddy.stop().catch(() => undefined);
    await connection.close();
    await down(stateDir, true);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
