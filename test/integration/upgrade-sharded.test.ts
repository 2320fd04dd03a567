// The upgrade from the newest release before this checkout's version, with its work in flight, as a
// team runs it: the release's CRD and operator (as the installed ServiceAccount) with canary rollouts
// in their pause, a deletion waiting on the gateway, a drift, an image update, and, where a later
// version refuses a spec the release took (`refusedSince`), a model with that spec; the release's
// operator killed with SIGKILL; then this checkout's CRD and two replicas with 4 shards. Every model
// ends as its spec says or says why not, no canary keeps a share on a model that cannot proceed, no
// workflow task failed, the release's runs moved to their shard queues, and every run's history
// replays on this checkout's workflow bundle.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { workflowIdFor, type MachineModelSpec } from '../../src/core/api.js';
import { ReconcileMetrics } from '../../src/process/reconcile-metrics.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  startOperatorProcess,
  startShardedReplica,
  temporalClient,
  type OperatorProcess,
  type ShardedReplica,
} from '../support/operator-process.js';
import { releaseBuild, releases, type Release } from '../support/release-build.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const root = fileURLToPath(new URL('../..', import.meta.url));
const { version } = JSON.parse(readFileSync(`${root}/package.json`, 'utf8')) as { version: string };
/** The release a team upgrades from: the newest one whose operator differs from this checkout's. */
const from: Release = releases()
  .filter((r) => !sameOperator(r.commit))
  .at(-1)!;

function sameOperator(commit: string): boolean {
  const diff = spawnSync('git', [
    '-C',
    root,
    'diff',
    '--quiet',
    commit,
    '--',
    'src',
    'workflows',
    'activities',
    'crds',
  ]);
  return diff.status === 0;
}
/**
 * Specs a version began to refuse that the release before it admitted, with the message it gives: the
 * upgrade's model that cannot proceed. An upgrade that crosses none of them has no such model.
 */
const refusedSince: { version: string; spec: Partial<MachineModelSpec>; message: string }[] = [
  {
    version: '0.3.0',
    spec: { modelPath: 's3://models/classifier.pb' },
    message: 'is a storage URI: give it as spec.storageUri',
  },
];
const newer = (a: string, b: string) => a.localeCompare(b, 'en', { numeric: true }) > 0;
const refusal = refusedSince.find((r) => newer(r.version, from.version) && !newer(r.version, version));
/** The models that live through the upgrade, each in a canary pause or not. */
const live = ['steady', 'updating', 'rolling', ...(refusal ? ['refused'] : [])];
const canaries = ['rolling', ...(refusal ? ['refused'] : [])];
const taskQueue = `mmo-upgrade-${randomUUID().slice(0, 8)}`;
const v2 = 'registry.example.com/models/classifier:v2';
const { WorkflowTaskFailedCause } = temporal.api.enums.v1;
const unhandledCommand = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND;
let releaseDir: string;
let caddy: CaddyProcess;
let ns: string;
let old: OperatorProcess | undefined;
const replicas: ShardedReplica[] = [];

beforeAll(async () => {
  releaseDir = releaseBuild(from);
  // The release's CRD first, as the cluster had it: it took a storage URI as a modelPath.
  installCrds(stack, releaseDir);
  ns = k.createNamespace('upgrade-sharded');
  caddy = await CaddyProcess.create(stack);
}, 900_000);

afterAll(async () => {
  await old?.stop();
  await Promise.all(replicas.map((r) => r.process.stop()));
  await caddy?.stop();
  // The next files find this checkout's CRD, whatever happened here.
  installCrds(stack);
});

const published = (name: string) => conditionOf(k.get('machinemodel', ns, name), 'GatewayRegistered');
const image = (name: string) => k.get('deployment', ns, name)?.spec.template.spec.containers[0].image;
const patch = (name: string, spec: object) =>
  k.kubectl('-n', ns, 'patch', 'mm', name, '--type=merge', '-p', JSON.stringify({ spec }));

describe(`an upgrade from v${from.version} to this checkout (${version}) with work in flight, onto 2 replicas with 4 shards`, () => {
  it('finishes or explains every model, leaves no canary share on a model that cannot proceed, fails no workflow task, and replays every run', async () => {
    const env = { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: taskQueue, ...caddy.operatorEnv };
    old = startOperatorProcess(stack, env, `operator-v${from.version}`, releaseDir);
    const plan = (pause: string) => ({ strategy: 'Canary' as const, steps: [{ weight: 50, pause }] });
    k.apply([
      machineModel(ns, 'steady'),
      machineModel(ns, 'updating'),
      machineModel(ns, 'leaving'),
      machineModel(ns, 'rolling', { rollout: plan('30s') }),
      ...(refusal ? [machineModel(ns, 'refused', { rollout: plan('1h'), ...refusal.spec })] : []),
    ]);
    for (const n of [...live, 'leaving'])
      await eventually(
        `${n} Ready and published by v${from.version}`,
        () => (k.phaseOf(ns, n) === 'Ready' && published(n)?.status === 'True' ? true : undefined),
        120_000,
      );
    // Two canaries in their pause, at their share.
    for (const n of canaries) patch(n, { image: v2 });
    for (const n of canaries)
      await eventually(
        `${n}'s canary at 50 %`,
        () => (k.get('machinemodel', ns, n)?.status?.rollout?.weight === 50 ? true : undefined),
        120_000,
      );
    // A deletion held by its finalizer while the gateway is away; an update and a drift; then SIGKILL.
    await caddy.stop();
    k.kubectl('-n', ns, 'delete', 'mm', 'leaving', '--wait=false');
    await eventually('leaving waits for the gateway', () =>
      published('leaving')?.reason === 'UnregisterPending' ? true : undefined,
    );
    patch('updating', { image: v2 });
    k.kubectl('-n', ns, 'scale', 'deployment', 'steady', '--replicas=3');
    await old.kill();
    old = undefined;
    await caddy.start();

    installCrds(stack);
    const layout = { count: 4, hash: 'mixed' as const };
    for (const name of ['a', 'b']) replicas.push(await startShardedReplica(stack, layout, `upgraded-${name}`, env));

    await eventually(
      'steady repaired',
      () =>
        (k.get('deployment', ns, 'steady')?.spec.replicas === 1 && k.phaseOf(ns, 'steady') === 'Ready') || undefined,
      120_000,
    );
    await eventually(
      'updating Ready on v2',
      () => {
        const mm = k.get('machinemodel', ns, 'updating');
        return (
          (image('updating') === v2 &&
            mm?.status?.phase === 'Ready' &&
            mm.status.observedGeneration === mm.metadata.generation) ||
          undefined
        );
      },
      120_000,
    );
    await eventually('leaving gone', () => k.get('machinemodel', ns, 'leaving') === undefined || undefined, 120_000);
    await eventually(
      'rolling promoted: stable on v2, its canary gone',
      () => {
        const mm = k.get('machinemodel', ns, 'rolling');
        return (
          (mm?.status?.rollout?.phase === 'Promoted' &&
            mm.status.phase === 'Ready' &&
            image('rolling') === v2 &&
            !k.get('deployment', ns, 'rolling-canary')) ||
          undefined
        );
      },
      180_000,
    );
    if (refusal) await expectRefusedWithdrawn(refusal.message);
    expect(JSON.stringify(await caddy.routes())).not.toContain('leaving');

    const client = await temporalClient(stack);
    try {
      await expectRunsMovedToShards(client);
      await expectEveryRunClean(client);
    } finally {
      await client.connection.close();
    }
  }, 900_000);
});

/** The model this checkout refuses says why, and its canary lost its share and its Pods. */
async function expectRefusedWithdrawn(message: string) {
  const refused = await eventually<any>(
    'refused Failed with InvalidSpec, its canary gone',
    () => {
      const mm = k.get('machinemodel', ns, 'refused');
      return conditionOf(mm, 'Ready')?.reason === 'InvalidSpec' && !k.get('deployment', ns, 'refused-canary')
        ? mm
        : undefined;
    },
    120_000,
  );
  expect(conditionOf(refused, 'Ready')?.message).toContain(message);
  expect(JSON.stringify(await caddy.routes())).not.toContain('refused-canary');
  expect(image('refused')).not.toBe(v2);
}

/** Each live model's workflow runs on its shard's queue, not on the base queue the release used. */
async function expectRunsMovedToShards(client: Client) {
  for (const name of live) {
    const queue = await eventually(
      `${name}'s workflow on a shard queue`,
      async () => {
        const d = await client.workflow.getHandle(workflowIdFor(ns, name)).describe();
        return /\/shard-[0-3]$/.test(d.taskQueue) ? d.taskQueue : undefined;
      },
      120_000,
    );
    expect(queue.startsWith(`${taskQueue}/shard-`)).toBe(true);
  }
}

/** No run of the install's queues failed a workflow task or ended FAILED, and each replays on this checkout's bundle. */
async function expectEveryRunClean(client: Client) {
  const registry = new Registry();
  const options = {
    workflowBundle: { codePath: `${root}/dist/workflow-bundle.js` },
    sinks: new ReconcileMetrics(registry).sinks(),
  } as ReplayWorkerOptions;
  let runs = 0;
  const queues = [taskQueue, ...[0, 1, 2, 3].map((i) => `${taskQueue}/shard-${i}`)];
  const query = queues.map((q) => `TaskQueue = '${q}'`).join(' OR ');
  for await (const run of client.workflow.list({ query })) {
    runs++;
    const label = `${run.workflowId} run ${run.runId}`;
    const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    // UnhandledCommand is the server's, not the code's: a signal landed as the task completed the run
    // (continued it as new), and the worker takes the task again with the signal.
    const failed = (history.events ?? []).filter(
      (e) => e.workflowTaskFailedEventAttributes && e.workflowTaskFailedEventAttributes.cause !== unhandledCommand,
    );
    expect(
      failed.map((e) => WorkflowTaskFailedCause[e.workflowTaskFailedEventAttributes!.cause!]),
      label,
    ).toEqual([]);
    expect(run.status.name, label).not.toBe('FAILED');
    await Worker.runReplayHistory({ ...options, taskQueue: run.taskQueue } as ReplayWorkerOptions, history, label);
    // With MMO_UPGRADE_HISTORIES=<dir> they are written there (test/histories/README.md says which are kept).
    if (process.env.MMO_UPGRADE_HISTORIES) {
      const file = `${run.workflowId.replaceAll('/', '_')}_${run.runId}.json`;
      writeFileSync(path.join(process.env.MMO_UPGRADE_HISTORIES, file), historyToJSON(history));
    }
  }
  // Each model's runs, the rollouts, and the moves.
  expect(runs).toBeGreaterThan(live.length * 2);
}
