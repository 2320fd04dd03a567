// Upgrades through the last two releases (CHANGELOG.md) to this checkout, one release at a time, with
// work in flight at each step: the older release's operator is killed with SIGKILL in the middle of an
// image update, a deletion waiting on the gateway and a drift it has not repaired; the next release
// takes over the same task queue and finishes them, and is killed in its turn in the middle of a
// canary rollout's pause; this checkout's operator takes over and finishes the rollout. Every run
// replays on the newer code: none fails for nondeterminism.
import { randomUUID } from 'node:crypto';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { workflowIdFor } from '../../src/core/api.js';
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
import { releaseBuild, releases, type Release } from '../support/release-build.js';

const stack = inject('stack');
const k = kubectlFor(stack);
/** The releases the test upgrades through, oldest first: the last two. */
const chain: Release[] = releases().slice(-2);
const releaseDirs: string[] = [];
let caddy: CaddyProcess;
let ns: string;
const operators: OperatorProcess[] = [];
const nonDeterministic =
  temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR;

beforeAll(async () => {
  for (const release of chain) releaseDirs.push(releaseBuild(release));
  installCrds(stack);
  ns = k.createNamespace('upgrade');
  caddy = await CaddyProcess.create(stack);
}, 900_000);

afterAll(async () => {
  await Promise.all(operators.map((o) => o.stop()));
  await caddy?.stop();
});

function operator(checkout: string | undefined, taskQueue: string, name: string): OperatorProcess {
  const env = { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: taskQueue, ...caddy.operatorEnv };
  const started = startOperatorProcess(stack, env, name, checkout);
  operators.push(started);
  return started;
}

const published = (name: string) => conditionOf(k.get('machinemodel', ns, name), 'GatewayRegistered');

const v = (r: Release) => `v${r.version}`;

describe(`an upgrade ${chain.map(v).join(' → ')} → this checkout`, () => {
  it('finishes an update, a deletion and a drift repair, then a canary rollout, that each killed release left in flight', async () => {
    const taskQueue = `mmo-${randomUUID()}`;
    const first = chain[0]!;
    const old = operator(releaseDirs[0], taskQueue, `operator-${v(first)}`);
    const names = ['steady', 'updating', 'leaving'];
    k.apply(names.map((n) => machineModel(ns, n)));
    for (const n of names) {
      await eventually(
        `${n} Ready and published by ${v(first)}`,
        () => (k.phaseOf(ns, n) === 'Ready' && published(n)?.status === 'True' ? true : undefined),
        120_000,
      );
    }

    // A deletion held by its finalizer while the gateway is away.
    await caddy.stop();
    k.kubectl('-n', ns, 'delete', 'mm', 'leaving', '--wait=false');
    await eventually('leaving waits for the gateway', () =>
      published('leaving')?.reason === 'UnregisterPending' ? true : undefined,
    );
    // An image update and a drift, then the release's operator dies at once.
    const v2 = 'registry.example.com/models/classifier:v2';
    k.kubectl('-n', ns, 'patch', 'mm', 'updating', '--type=merge', '-p', JSON.stringify({ spec: { image: v2 } }));
    k.kubectl('-n', ns, 'scale', 'deployment', 'steady', '--replicas=3');
    await old.kill();
    await caddy.start();

    const next = chain[1];
    const takeover = operator(
      next ? releaseDirs[1] : undefined,
      taskQueue,
      next ? `operator-${v(next)}` : 'operator-working-tree',
    );
    await finished(v2);
    if (next) {
      // A canary rollout in its pause, its canary at its share, when the next release dies.
      const plan = { strategy: 'Canary' as const, steps: [{ weight: 50, pause: '20s' }] };
      k.apply(machineModel(ns, 'rolling', { rollout: plan }));
      await eventually(
        `rolling Ready under ${v(next)}`,
        () => (k.phaseOf(ns, 'rolling') === 'Ready' ? true : undefined),
        120_000,
      );
      k.kubectl('-n', ns, 'patch', 'mm', 'rolling', '--type=merge', '-p', JSON.stringify({ spec: { image: v2 } }));
      await eventually(
        'the canary at its share',
        () => (k.get('machinemodel', ns, 'rolling')?.status?.rollout?.weight === 50 ? true : undefined),
        120_000,
      );
      await takeover.kill();
      operator(undefined, taskQueue, 'operator-working-tree');
      await eventually(
        'rolling promoted, stable on v2, its canary gone',
        () => {
          const mm = k.get('machinemodel', ns, 'rolling');
          const image = k.get('deployment', ns, 'rolling')?.spec.template.spec.containers[0].image;
          return mm?.status?.rollout?.phase === 'Promoted' &&
            mm.status.phase === 'Ready' &&
            image === v2 &&
            !k.get('deployment', ns, 'rolling-canary')
            ? true
            : undefined;
        },
        180_000,
      );
    }

    // No run met code it could not replay: the models' nor the rollouts'.
    const client = await temporalClient(stack);
    try {
      let runs = 0;
      for await (const run of client.workflow.list({ query: `TaskQueue = '${taskQueue}'` })) {
        runs++;
        const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
        const nondeterministic = (history.events ?? []).filter(
          (e) => e.workflowTaskFailedEventAttributes?.cause === nonDeterministic,
        );
        expect(nondeterministic, `${run.workflowId} run ${run.runId}`).toEqual([]);
        expect(run.status.name, `${run.workflowId} run ${run.runId}`).not.toBe('FAILED');
      }
      expect(runs).toBeGreaterThan(names.length);
    } finally {
      await client.connection.close();
    }
  }, 600_000);
});

/** The work the first release left in flight, finished by whichever operator took over. */
async function finished(v2: string) {
  await eventually(
    'steady repaired',
    () =>
      k.get('deployment', ns, 'steady')?.spec.replicas === 1 && k.phaseOf(ns, 'steady') === 'Ready' ? true : undefined,
    120_000,
  );
  await eventually(
    'updating Ready on the new image',
    () => {
      const mm = k.get('machinemodel', ns, 'updating');
      const image = k.get('deployment', ns, 'updating')?.spec.template.spec.containers[0].image;
      return image === v2 && mm?.status?.phase === 'Ready' && mm.status.observedGeneration === mm.metadata.generation
        ? true
        : undefined;
    },
    120_000,
  );
  await eventually(
    'leaving gone',
    () => (k.get('machinemodel', ns, 'leaving') === undefined ? true : undefined),
    120_000,
  );
  expect((await caddy.routes()).map((r) => r['@id']).filter((id) => id?.includes('leaving'))).toEqual([]);
}
