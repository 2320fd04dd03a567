// A model's workflow with a rollout in its spec, on the time-skipping server with stubbed activities:
// a new revision starts a canary rollout (the real child workflow), and its end shows in the model's
// status: promoted (the revision becomes stable, the canary goes), rolled back (Failed, Stalled, the
// stable revision serves), overtaken by a newer revision, or stopped by the model's deletion.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { workflowIdFor, type RolloutSpec } from '../../src/core/api.js';
import { reconcileSignal, stateQuery, type MachineModelWorkflowInput } from '../../workflows/definitions.js';
import { rolloutReportSignal, type RolloutReport } from '../../workflows/rollout-definitions.js';
import { eventually } from '../support/eventually.js';
import { FakeCluster } from '../support/fake-cluster.js';
import { useWorkflowTestEnv } from '../support/workflow-env.js';

const wf = useWorkflowTestEnv();

const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 20, pause: '5m' }] };
const v1 = { image: 'registry.example/m:1', modelPath: '/models/m' };
const v2 = { image: 'registry.example/m:2', modelPath: '/models/m' };

/** A Ready model on v1 with a rollout plan, its workflow running. */
async function readyModel(tq: string, cluster: FakeCluster) {
  // A name of its own: a rollout's workflow id is the model's, and rollouts outlive a test's model workflow.
  cluster.name = `m-${randomUUID().slice(0, 8)}`;
  cluster.ready = true;
  // The canary's share lives on the gateway's route.
  cluster.gatewayConfigured = true;
  cluster.spec = { ...cluster.spec, ...v1, rollout: plan };
  const input: MachineModelWorkflowInput = { namespace: 'default', name: cluster.name };
  const handle = await wf.env.client.workflow.start('machineModelWorkflow', {
    taskQueue: tq,
    workflowId: workflowIdFor('default', cluster.name),
    args: [input],
  });
  await eventually('Ready on v1', () => cluster.status?.phase === 'Ready' && cluster.deployed?.image === v1.image);
  return handle;
}

/** The spec changes, and the informer says so. */
async function changeSpec(
  handle: Awaited<ReturnType<typeof readyModel>>,
  cluster: FakeCluster,
  change: Partial<FakeCluster['spec']>,
) {
  cluster.spec = { ...cluster.spec, ...change };
  cluster.generation++;
  await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', generation: cluster.generation });
}

const update = (handle: Awaited<ReturnType<typeof readyModel>>, cluster: FakeCluster, image: string) =>
  changeSpec(handle, cluster, { image });

/**
 * Ends the model's workflow and the rollout it abandons at the end of a test: a rollout left running
 * would keep asking on a task queue no worker polls, and the test server's clock stands still while
 * an activity is due.
 */
async function stop(handle: Awaited<ReturnType<typeof readyModel>>) {
  const { rollout } = await handle.query(stateQuery);
  await handle.terminate();
  if (rollout?.running)
    await wf.env.client.workflow
      .getHandle(rollout.workflowId)
      .terminate()
      .catch(() => undefined);
}

const condition = (cluster: FakeCluster, type: string) => cluster.status?.conditions?.find((c) => c.type === type);

describe('machineModelWorkflow with spec.rollout', () => {
  it('rolls a new revision out as a canary, then makes it stable and removes the canary', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await readyModel(tq, cluster);
      // The first revision went out without a canary: nothing ran before it.
      expect(cluster.calls.applyCanary ?? 0).toBe(0);
      // Malformed payloads (anyone who may signal can send them) are dropped, not thrown on in a handler.
      for (const [name, raw] of [
        ['reconcile', null],
        ['deleted', null],
        ['rolloutReport', {}],
        ['rolloutReport', { view: { revision: 7 } }],
      ] as const)
        await wf.env.client.workflow.getHandle(handle.workflowId).signal(name, raw);
      await update(handle, cluster, v2.image);
      await eventually('the canary at 20 %', () => cluster.canary.weight === 20);
      const { rollout } = await handle.query(stateQuery);
      await wf.env.client.workflow.getHandle(rollout!.workflowId).signal('canaryAnswered', 'garbage');
      // The stable Deployment keeps v1 while the canary runs v2.
      expect(cluster.deployed).toEqual(v1);
      await eventually('status.rollout', () => cluster.status?.rollout?.weight === 20);
      expect(cluster.status).toMatchObject({
        phase: 'Ready',
        rollout: { phase: 'Progressing', step: 1, steps: 1, stable: v1, canary: v2 },
      });
      expect(condition(cluster, 'Reconciling')).toMatchObject({ status: 'True', reason: 'RolloutInProgress' });

      await wf.env.sleep('6 minutes');
      await eventually(
        'v2 stable and the canary gone',
        () => cluster.deployed?.image === v2.image && cluster.canary.removed === 1,
      );
      await eventually('status says Promoted', () => cluster.status?.rollout?.phase === 'Promoted');
      // The rollout's promotion gave the share back before the stable revision moved to it.
      expect(cluster.canary.weights).toEqual([20, 0]);
      expect(condition(cluster, 'Progressing')).toMatchObject({ status: 'False', reason: 'RolloutPromoted' });
      expect(condition(cluster, 'Reconciling')?.status).toBe('False');
      expect(cluster.status?.phase).toBe('Ready');
      await stop(handle);
    });
  });

  it('keeps the stable revision after a rollback and says so (Failed, Stalled) until the spec changes; takes no forged report of it', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await readyModel(tq, cluster);
      cluster.canary.trouble = {
        kind: 'crash-loop',
        pods: 1,
        container: 'model',
        restarts: 3,
        lastReason: 'Error',
        exitCode: 3,
      };
      await update(handle, cluster, v2.image);
      await eventually('Failed for the rollout', () => cluster.status?.phase === 'Failed');
      expect(cluster.deployed).toEqual(v1);
      expect(cluster.canary.removed).toBe(1);
      expect(condition(cluster, 'Ready')).toMatchObject({ status: 'False', reason: 'RolloutFailed' });
      expect(condition(cluster, 'Ready')?.message).toContain(
        'ended RolledBack: rolled back at step 1 (20%): canary not ready',
      );
      expect(condition(cluster, 'Stalled')).toMatchObject({ status: 'True', reason: 'RolloutFailed' });
      expect(cluster.status?.rollout).toMatchObject({ phase: 'RolledBack', stable: v1, canary: v2 });
      // No second rollout of the same revision.
      await wf.env.sleep('20 minutes');
      expect(cluster.calls.applyCanary).toBeLessThan(10);
      expect(cluster.status?.phase).toBe('Failed');

      // Forged reports of the ended rollout, claiming Promoted with its own run, another run, or none:
      // none is taken, none costs a round, the stable Deployment stays.
      const { rollout, rounds } = await handle.query(stateQuery);
      // The model recorded the run it started: a forger who read the history knows it too.
      expect(rollout!.runId).toBeTruthy();
      const view = { ...rollout!.view!, phase: 'Promoted' as const };
      for (const from of [
        { workflowId: rollout!.workflowId, firstRunId: rollout!.runId! },
        { workflowId: rollout!.workflowId, firstRunId: 'another-run' },
        undefined,
      ])
        await handle.signal(rolloutReportSignal, {
          ...(from ? { from } : {}),
          view,
          result: { outcome: 'Promoted', revision: rollout!.revision, message: 'forged', view },
        } satisfies RolloutReport);
      await wf.env.sleep('5 minutes');
      const after = await handle.query(stateQuery);
      expect(after.rounds).toBe(rounds);
      expect(after.rollout).toMatchObject({ running: false, result: { outcome: 'RolledBack' } });
      expect(cluster.deployed).toEqual(v1);
      expect(cluster.status?.rollout?.phase).toBe('RolledBack');

      // A fixed revision starts a rollout of its own.
      cluster.canary.trouble = undefined;
      await update(handle, cluster, 'registry.example/m:3');
      await eventually(
        'v3 at 20 %',
        () => cluster.status?.rollout?.canary.image === 'registry.example/m:3' && cluster.canary.weight === 20,
      );
      expect(cluster.status?.phase).toBe('Ready');
      await stop(handle);
    });
  });

  it('cancels a rollout that a newer revision overtakes; its canary stops taking traffic first', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await readyModel(tq, cluster);
      await update(handle, cluster, v2.image);
      await eventually('v2 at 20 %', () => cluster.canary.weight === 20);
      await update(handle, cluster, 'registry.example/m:3');
      await eventually('v3 rolling out', () => cluster.status?.rollout?.canary.image === 'registry.example/m:3');
      await eventually('v3 at 20 %', () => cluster.canary.weights.join() === '20,0,20');
      const state = await handle.query(stateQuery);
      expect(state.rollout).toMatchObject({ running: true, revision: { image: 'registry.example/m:3' } });
      await stop(handle);
    });
  });

  it('stops the rollout when the model is deleted, and nothing puts its route back (bug 4)', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await readyModel(tq, cluster);
      await update(handle, cluster, v2.image);
      await eventually('v2 at 20 %', () => cluster.canary.weight === 20);
      const { rollout } = await handle.query(stateQuery);
      cluster.deleting = true;
      await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
      expect(await handle.result()).toMatchObject({ finished: true });
      // The cancelled rollout has closed: nothing of it can run later.
      const cancelled = wf.env.client.workflow.getHandle(rollout!.workflowId);
      await expect(cancelled.result()).rejects.toThrow();
      expect((await cancelled.describe()).status.name).toBe('CANCELLED');
      // The route went with the model, and no share was put on it again.
      expect(cluster.routes.size).toBe(0);
      expect(cluster.canary.weights).toEqual([20]);
    });
  });

  it('withdraws the canary of a spec that turned invalid: rollout cancelled, share off the route, canary removed', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await readyModel(tq, cluster);
      await update(handle, cluster, v2.image);
      await eventually('v2 at 20 %', () => cluster.canary.weight === 20);
      const { rollout } = await handle.query(stateQuery);
      // A modelPath 0.2.0 took as a path and 0.3.0 reads as a storage URI.
      await changeSpec(handle, cluster, { modelPath: 's3://models/m' });
      await eventually('Failed, InvalidSpec', () => condition(cluster, 'Ready')?.reason === 'InvalidSpec');
      await eventually('the canary removed', () => cluster.canary.removed === 1);
      expect(cluster.canary.weights).toEqual([20, 0]);
      expect(cluster.deployed).toEqual(v1);
      const cancelled = wf.env.client.workflow.getHandle(rollout!.workflowId);
      await eventually('the rollout cancelled', async () => (await cancelled.describe()).status.name === 'CANCELLED');
      // Nothing comes back while the spec stays invalid: the rollout is closed, so nothing asks. (Not a
      // time-skipping sleep: one begun while the cancelled rollout's activity was still due sometimes
      // waited in real time, past the test's timeout.)
      const { rounds } = await handle.query(stateQuery);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(cluster.canary.weights).toEqual([20, 0]);
      expect(cluster.calls.applyCanary).toBe(1);
      expect((await handle.query(stateQuery)).rounds).toBe(rounds);

      // Fixed, with the same revision: its rollout starts again (the cancelled one ended nothing).
      await changeSpec(handle, cluster, { modelPath: v2.modelPath });
      await eventually('v2 at 20 % again', () => cluster.canary.weight === 20 && cluster.status?.phase === 'Ready');
      expect(cluster.status?.rollout).toMatchObject({ phase: 'Progressing', canary: v2 });
      await stop(handle);
    });
  });
});
