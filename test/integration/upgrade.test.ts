// An upgrade from the latest release (CHANGELOG.md) to this checkout with work in flight: the release's
// operator is killed with SIGKILL in the middle of an image update, a deletion waiting on the gateway
// and a drift it has not repaired; this checkout's operator takes over the same task queue and every
// run replays on the new code and finishes the work.
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
import { latestRelease, releaseBuild } from '../support/release-build.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const release = latestRelease();
let releaseDir: string;
let caddy: CaddyProcess;
let ns: string;
const operators: OperatorProcess[] = [];
const nonDeterministic =
  temporal.api.enums.v1.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR;

beforeAll(async () => {
  releaseDir = releaseBuild(release);
  installCrds(stack);
  ns = k.createNamespace('upgrade');
  caddy = await CaddyProcess.create(stack);
}, 600_000);

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

describe(`an upgrade from v${release.version}`, () => {
  it('finishes an update, a deletion and a drift repair that the killed release left in flight', async () => {
    const taskQueue = `mmo-${randomUUID()}`;
    const old = operator(releaseDir, taskQueue, `operator-v${release.version}`);
    const names = ['steady', 'updating', 'leaving'];
    k.apply(names.map((n) => machineModel(ns, n)));
    for (const n of names) {
      await eventually(
        `${n} Ready and published by v${release.version}`,
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
    operator(undefined, taskQueue, 'operator-working-tree');
    await eventually(
      'steady repaired',
      () =>
        k.get('deployment', ns, 'steady')?.spec.replicas === 1 && k.phaseOf(ns, 'steady') === 'Ready'
          ? true
          : undefined,
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

    // No run met code it could not replay.
    const client = await temporalClient(stack);
    try {
      for (const n of names) {
        for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowIdFor(ns, n)}'` })) {
          const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
          const nondeterministic = (history.events ?? []).filter(
            (e) => e.workflowTaskFailedEventAttributes?.cause === nonDeterministic,
          );
          expect(nondeterministic, `${n} run ${run.runId}`).toEqual([]);
          expect(run.status.name, `${n} run ${run.runId}`).not.toBe('FAILED');
        }
      }
    } finally {
      await client.connection.close();
    }
  }, 300_000);
});
