import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowUpdateStage, type WorkflowHandle } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { finalizerName, workflowIdFor } from '../../src/core/api.js';
import type { WorkflowConfig } from '../../src/core/reconcile-timing.js';
import {
  deletedSignal,
  moveSignal,
  reconcileNowUpdate,
  reconcileSignal,
  stateQuery,
  type RoundOutcome,
} from '../../workflows/definitions.js';
import { startOptions } from '../../src/temporal/workflow-client.js';
import { eventually } from '../support/eventually.js';
import { patchMarkersOf, type RecordedHistory } from '../support/histories.js';
import { FakeCluster } from '../support/fake-cluster.js';
import { startModelWorkflow, useWorkflowTestEnv } from '../support/workflow-env.js';

const wf = useWorkflowTestEnv();

const start = (taskQueue: string, config: Partial<WorkflowConfig> = {}) =>
  startModelWorkflow(wf.env, taskQueue, config);

describe('machineModelWorkflow', () => {
  it('applies children and reports Ready; without a gateway it adds no finalizer', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      expect(cluster.finalizers).toEqual([]);
      expect(cluster.calls.ensureFinalizer ?? 0).toBe(0);
      expect(cluster.status?.inferenceURL).toBe('http://m.default.svc.cluster.local:80');
      // The fake holds the status as soon as the activity ran; the workflow learns it a moment later.
      await eventually('the workflow to see Ready', async () => (await handle.query(stateQuery)).phase === 'Ready');
      expect((await handle.query(stateQuery)).uid).toBe('uid-1');
      await handle.terminate();
    });
  });

  it('runs as the informer starts it (uid as memo): the stable-clock marker only, no memo write', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.gatewayConfigured = true;
    const key = { namespace: 'default', name: 'm' };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await wf.env.client.workflow.start('machineModelWorkflow', {
        ...startOptions(key, { taskQueue: tq, workflow: {} }, 'uid-1'),
        workflowId: `${workflowIdFor('default', 'm')}-${randomUUID()}`,
      });
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      await eventually('the workflow to see Ready', async () => (await handle.query(stateQuery)).phase === 'Ready');
      // A gateway is configured: a finalizer, the route published.
      expect(cluster.finalizers).toEqual([finalizerName]);
      expect(cluster.calls.registerRoute).toBe(1);
      const { events } = await handle.fetchHistory();
      // A model without a rollout takes one guarded path, the loop's rate limit: one marker for the run.
      expect(patchMarkersOf({ events: (events ?? []) as RecordedHistory['events'] })).toEqual(['stable-clock']);
      expect((events ?? []).filter((e) => e.workflowPropertiesModifiedEventAttributes)).toEqual([]);
      expect((await handle.describe()).memo).toEqual({ uid: 'uid-1' });
      await handle.terminate();
    });
  });

  it('fails with ProgressDeadlineExceeded when not ready in time, and recovers when ready', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { progressDeadlineSeconds: 600 });
      await eventually('Deploying', () => cluster.status?.phase === 'Deploying');
      await wf.env.sleep('11 minutes');
      await eventually('Failed', () => cluster.status?.phase === 'Failed');
      const ready = cluster.status?.conditions?.find((c) => c.type === 'Ready');
      expect(ready?.reason).toBe('ProgressDeadlineExceeded');
      expect(ready?.message).toMatch(/not ready within 600s/);
      cluster.ready = true;
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated' });
      await eventually('Ready again', () => cluster.status?.phase === 'Ready');
      await handle.terminate();
    });
  });

  /** Starts a model, deletes it while it is Deploying, and returns the last round's outcome. */
  async function deletedWhileDeploying(cluster: FakeCluster) {
    let outcome: RoundOutcome | undefined;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Deploying', () => cluster.status?.phase === 'Deploying');
      cluster.deleting = true;
      await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
      outcome = await handle.result();
    });
    return outcome!;
  }

  it('runs deletion while waiting for readiness and completes; without a gateway nothing waits on it', async () => {
    const cluster = new FakeCluster();
    const outcome = await deletedWhileDeploying(cluster);
    expect(outcome.finished).toBe(true);
    expect(cluster.verdicts).not.toContain('deleting');
    expect(cluster.calls.unregisterRoute ?? 0).toBe(0);
    expect(cluster.calls.removeFinalizer ?? 0).toBe(0);
  });

  it('removes a finalizer added while a gateway was configured, without a Deleting status', async () => {
    const cluster = new FakeCluster();
    cluster.finalizers = [finalizerName];
    const outcome = await deletedWhileDeploying(cluster);
    expect(outcome.finished).toBe(true);
    // Without a gateway nothing outside the namespace can hold the finalizer: no Deleting status, no route step.
    expect(cluster.verdicts).not.toContain('deleting');
    expect(cluster.calls.unregisterRoute ?? 0).toBe(0);
    expect(cluster.calls.removeFinalizer).toBe(1);
    expect(cluster.exists).toBe(false);
  });

  /** A model to Ready, deleted; while its last round runs, `during` happens. Returns the handle. */
  async function deleteWhileSignalled(
    cluster: FakeCluster,
    tq: string,
    during: (handle: Awaited<ReturnType<typeof start>>) => Promise<void>,
  ) {
    // With a gateway, so that the finalizer's removal is the deletion round's last step.
    cluster.gatewayConfigured = true;
    cluster.ready = true;
    cluster.removeFinalizerDelayMs = 1_000;
    const handle = await start(tq);
    await eventually('Ready', () => cluster.status?.phase === 'Ready');
    cluster.deleting = true;
    await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', uid: 'uid-1' });
    await eventually('the finalizer being removed', () => (cluster.calls.removeFinalizer ?? 0) >= 1);
    await during(handle);
    return handle;
  }

  it('after the deletion round, signals about its own object end in COMPLETED', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await deleteWhileSignalled(cluster, tq, async (handle) => {
        // What the informer sends while the last round runs: the finalizer's removal, then the deletion.
        await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', uid: 'uid-1' });
        await handle.signal(deletedSignal, { uid: 'uid-1' });
      });
      await handle.result();
      const firstRun = wf.env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
      expect((await firstRun.describe()).status.name).toBe('COMPLETED');
    });
  });

  it('after the deletion round, a new object of the same name is reconciled, not missed', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await deleteWhileSignalled(cluster, tq, async (handle) => {
        // The old object goes and a new one of the same name arrives while the last round runs. Where
        // the signals land (before or after that round's reads) decides whether the run continues as
        // new or picks the new object up itself; either way the new object is reconciled.
        cluster.recreateAs = 'uid-2';
        await handle.signal(deletedSignal, { uid: 'uid-1' });
        await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'added', uid: 'uid-2' });
      });
      await eventually('the new object Ready', () => cluster.status?.phase === 'Ready');
      const latest = wf.env.client.workflow.getHandle(handle.workflowId);
      expect((await latest.query(stateQuery)).uid).toBe('uid-2');
      expect(cluster.finalizers).toContain(finalizerName);
      await latest.terminate();
    });
  });

  it('publishes the route when Ready and, with the gateway down, keeps the finalizer until it returns', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.gatewayConfigured = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('registered', () => cluster.routes.has('uid-1') && cluster.status?.gatewayURL !== undefined);
      expect(cluster.status?.conditions?.find((c) => c.type === 'GatewayRegistered')?.status).toBe('True');

      cluster.gatewayDown = true;
      cluster.deleting = true;
      await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
      // The condition is written before the Event is recorded: wait for both, not one then the other.
      await eventually(
        'UnregisterPending and its Event',
        () =>
          (cluster.status?.conditions?.some((c) => c.reason === 'UnregisterPending') ?? false) &&
          cluster.eventReasons.includes('GatewayUnavailable'),
      );
      expect(cluster.finalizers).toContain(finalizerName);

      cluster.gatewayDown = false;
      const outcome = await handle.result();
      expect(outcome.finished).toBe(true);
      expect(cluster.routes.size).toBe(0);
      expect(cluster.finalizers).not.toContain(finalizerName);
    });
  });

  it('removes the route of an object that vanished without its finalizer, by its own uid', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.gatewayConfigured = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('registered', () => cluster.routes.has('uid-1'));
      cluster.routes.add('uid-other-model');
      cluster.exists = false;
      await handle.signal(deletedSignal, { uid: 'uid-1' });
      await handle.result();
      expect([...cluster.routes]).toEqual(['uid-other-model']);
    });
  });

  it('completes when the object vanished without its finalizer running', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      cluster.exists = false;
      await handle.signal(deletedSignal, { uid: 'uid-1' });
      const outcome = await handle.result();
      expect(outcome.finished).toBe(true);
      expect(cluster.calls.removeFinalizer ?? 0).toBe(0);
    });
  });

  it('turns a permanent error into phase Failed without retrying it', async () => {
    const cluster = new FakeCluster();
    cluster.applyFailure = ApplicationFailure.nonRetryable(
      'Deployment default/m exists and is not owned by this MachineModel',
      'NotOwned',
    );
    await wf.withWorker(cluster, async (tq, metrics) => {
      const handle = await start(tq);
      await eventually('Failed', () => cluster.status?.phase === 'Failed');
      const ready = cluster.status?.conditions?.find((c) => c.type === 'Ready');
      expect(ready?.reason).toBe('NotOwned');
      expect(ready?.message).toContain('not owned by this MachineModel');
      expect(cluster.calls.applyChildren).toBe(1);
      // The apply refused inside the read step counts as a terminal attempt of that step.
      const attempts = await metrics.getSingleMetric('machinemodel_operator_activity_attempts_total')!.get();
      expect(attempts.values).toContainEqual({
        labels: { activity: 'readAndApply', local: 'true', result: 'terminal' },
        value: 1,
      });
      await handle.terminate();
    });
  });

  it('reports a namespace being deleted as Deleting, not Failed', async () => {
    const cluster = new FakeCluster();
    cluster.applyFailure = ApplicationFailure.nonRetryable(
      'applying children of MachineModel default/m: unable to create new content in namespace default because it is being terminated (HTTP 403)',
      'NamespaceTerminating',
    );
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Deleting', () => cluster.status?.phase === 'Deleting');
      expect(cluster.verdicts).not.toContain('failed');
      expect(cluster.status?.conditions?.find((c) => c.type === 'Ready')?.message).toMatch(
        /being terminated.*deleted with its namespace/,
      );
      expect(cluster.calls.applyChildren).toBe(1);
      await handle.terminate();
    });
  });

  it('reports an invalid spec as Failed and does not apply anything', async () => {
    const cluster = new FakeCluster();
    cluster.spec = { ...cluster.spec, resources: { cpu: 'lots', memory: '1Gi' } };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Failed', () => cluster.status?.phase === 'Failed');
      expect(cluster.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('InvalidSpec');
      expect(cluster.calls.applyChildren ?? 0).toBe(0);
      await handle.terminate();
    });
  });

  it('answers reconcileNow with the outcome of a fresh round', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      const before = (await handle.query(stateQuery)).rounds;
      const outcome = await handle.executeUpdate(reconcileNowUpdate, { args: [{ requestedBy: 'test' }] });
      expect(outcome.round).toBeGreaterThan(before);
      expect(outcome.phase).toBe('Ready');
      await handle.terminate();
    });
  });

  /** A model's workflow started on the base queue `tq`, Ready, with a worker on `${tq}/shard-1` too. */
  async function readyWithShardWorker(
    cluster: FakeCluster,
    config: Partial<WorkflowConfig>,
    fn: (ctx: { tq: string; shardQueue: string; firstRunId: string; latest: () => WorkflowHandle }) => Promise<void>,
  ): Promise<void> {
    cluster.ready = true;
    await wf.withWorker(cluster, async (tq) => {
      const shardQueue = `${tq}/shard-1`;
      const shardWorker = await wf.worker(cluster.activities(), shardQueue);
      await shardWorker.runUntil(async () => {
        const started = await start(tq, config);
        const latest = () => wf.env.client.workflow.getHandle(started.workflowId);
        await eventually('the workflow to see Ready', async () => (await latest().query(stateQuery)).phase === 'Ready');
        await fn({ tq, shardQueue, firstRunId: started.firstExecutionRunId, latest });
        await latest().terminate();
      });
    });
  }

  /** A round whose apply fails twice (it retries as a regular activity), and a reconcileNow taken meanwhile. */
  async function reconcileNowMidRound(cluster: FakeCluster, latest: () => WorkflowHandle) {
    cluster.applyTransientFailures = 3;
    const applied = cluster.calls.applyChildren ?? 0;
    await latest().signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
    await eventually('the round retrying its apply', () => (cluster.calls.applyChildren ?? 0) >= applied + 2);
    const state = await latest().query(stateQuery);
    expect(state.roundInProgress).toBe(true);
    // It waits for the next round.
    const update = await latest().startUpdate(reconcileNowUpdate, {
      args: [{ requestedBy: 'test' }],
      waitForStage: WorkflowUpdateStage.ACCEPTED,
    });
    return { update, roundDuring: state.rounds };
  }

  const markersOfRun = async (latest: () => WorkflowHandle, runId: string) => {
    const { events } = await wf.env.client.workflow.getHandle(latest().workflowId, runId).fetchHistory();
    return patchMarkersOf({ events: (events ?? []) as RecordedHistory['events'] });
  };

  it('moves to its shard’s queue when told, with its state and what was left of its wait; refuses any other queue', async () => {
    const cluster = new FakeCluster();
    await readyWithShardWorker(cluster, {}, async ({ tq, shardQueue, firstRunId, latest }) => {
      // Forged: a queue of no install (a worker of its own would run the model), and its own queue.
      await latest().signal(moveSignal, { taskQueue: 'somebody-elses-queue' });
      await latest().signal(moveSignal, { taskQueue: tq });
      await latest().signal(moveSignal, { taskQueue: `${tq}/shard-x` });
      // A round after those signals: the run took them, and stayed.
      await latest().executeUpdate(reconcileNowUpdate, { args: [{ requestedBy: 'test' }] });
      expect((await latest().describe()).runId).toBe(firstRunId);
      const rounds = (await latest().query(stateQuery)).rounds;
      await latest().signal(moveSignal, { taskQueue: shardQueue });
      await eventually('a run on the shard’s queue', async () => (await latest().describe()).taskQueue === shardQueue);
      const moved = await latest().query(stateQuery);
      // The same model, no round for the move: the new run waits out the drift check the old one began.
      expect(moved.rounds).toBe(rounds);
      expect(moved.runs).toBe(2);
      expect(moved.pendingWork).toBe(false);
      const first = await wf.env.client.workflow.getHandle(latest().workflowId, firstRunId).describe();
      expect(first.status.name).toBe('CONTINUED_AS_NEW');
      expect(await markersOfRun(latest, firstRunId)).toContain('move-to-shard-queue');
      // And it reconciles there.
      cluster.spec = { ...cluster.spec, minReplicas: 2, maxReplicas: 2 };
      const applied = cluster.calls.applyChildren ?? 0;
      await latest().signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
      await eventually('a round on the shard’s worker', () => (cluster.calls.applyChildren ?? 0) > applied);
    });
  });

  // helper-35: a move taken while a reconcileNow waited for the next round waited for all handlers to
  // finish before it continued as new, and the update waited for a round that never came.
  it('answers a reconcileNow that waits for a round when a move comes, then moves', async () => {
    const cluster = new FakeCluster();
    await readyWithShardWorker(cluster, {}, async ({ shardQueue, latest }) => {
      const { update, roundDuring } = await reconcileNowMidRound(cluster, latest);
      await latest().signal(moveSignal, { taskQueue: shardQueue });
      expect((await update.result()).round).toBe(roundDuring + 1);
      await eventually('a run on the shard’s queue', async () => (await latest().describe()).taskQueue === shardQueue);
    });
  });

  // Found beside helper-35's: a reconcileNow taken during the round after which a run continues as new
  // waited for a round of that run, and the run waited for it to finish before continuing: forever.
  it('answers a reconcileNow that waits for a round when the run is about to continue as new', async () => {
    const cluster = new FakeCluster();
    await readyWithShardWorker(cluster, { maxRoundsPerRun: 2 }, async ({ firstRunId, latest }) => {
      const { update, roundDuring } = await reconcileNowMidRound(cluster, latest);
      expect(roundDuring).toBe(2);
      expect((await update.result()).round).toBe(3);
      await eventually('the run continued as new', async () => (await latest().describe()).runId !== firstRunId);
      expect(await markersOfRun(latest, firstRunId)).toContain('answer-before-continue');
    });
  });
});
