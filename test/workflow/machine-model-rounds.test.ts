import { setTimeout as sleep } from 'node:timers/promises';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { describe, expect, inject, it } from 'vitest';
import { ReconcileMetrics } from '../../src/process/reconcile-metrics.js';
import { roundsOfWorkflow } from '../../src/cli/model-workflows.js';
import type { WorkflowConfig } from '../../src/core/reconcile-timing.js';
import { reconcileNowUpdate, reconcileSignal, stateQuery } from '../../workflows/definitions.js';
import { eventually } from '../support/eventually.js';
import { localActivitiesOf, patchMarkersOf, type RecordedHistory } from '../support/histories.js';
import { FakeCluster } from '../support/fake-cluster.js';
import { startModelWorkflow, useWorkflowTestEnv } from '../support/workflow-env.js';

const wf = useWorkflowTestEnv();

const start = (taskQueue: string, config: Partial<WorkflowConfig> = {}) =>
  startModelWorkflow(wf.env, taskQueue, config);

describe('machineModelWorkflow rounds: echoes, coalescing, run length, steps', () => {
  it("ignores the watch event of its own round's write, from whichever replica it comes, and not anyone else's", async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.written = ['Deployment/41'];
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      await eventually('the first round done', async () => !(await handle.query(stateQuery)).roundInProgress);
      const rounds = (await handle.query(stateQuery)).rounds;
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated', resourceVersion: '41' });
      await eventually('the echo handled', async () => (await handle.query(stateQuery)).signals === 1);
      expect(await handle.query(stateQuery)).toMatchObject({ rounds, pendingWork: false });
      // The same version again: the other replica's informer saw it too.
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated', resourceVersion: '41' });
      await eventually('the second echo handled', async () => (await handle.query(stateQuery)).signals === 2);
      expect(await handle.query(stateQuery)).toMatchObject({ rounds, pendingWork: false });
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated', resourceVersion: '42' });
      await eventually('a round for a write of someone else', async () => {
        const state = await handle.query(stateQuery);
        return state.rounds === rounds + 1 && !state.roundInProgress;
      });
      await handle.terminate();
    });
  });

  it('ignores the echo of a write that arrives while the round that made it still runs', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.written = ['Service/7'];
    cluster.applyDelayMs = 1500;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('the first round to apply', () => (cluster.calls.applyChildren ?? 0) >= 1);
      // The informer can see the write before the step that made it returns.
      await handle.signal(reconcileSignal, { source: 'Service', event: 'added', resourceVersion: '7' });
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      await eventually('the round done', async () => {
        const state = await handle.query(stateQuery);
        return state.signals === 1 && !state.roundInProgress && !state.pendingWork;
      });
      expect((await handle.query(stateQuery)).rounds).toBe(1);
      expect(cluster.calls.applyChildren).toBe(1);
      await handle.terminate();
    });
  });

  it('ignores a coalesced signal whose events are all its own writes, and not one with a foreign event', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.written = ['Deployment/41', 'Service/42'];
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      await eventually('the first round done', async () => !(await handle.query(stateQuery)).roundInProgress);
      const rounds = (await handle.query(stateQuery)).rounds;
      const versions = ['Deployment/41', 'Service/42'];
      await handle.signal(reconcileSignal, { source: 'Service', event: 'added', versions });
      await eventually('the echo handled', async () => (await handle.query(stateQuery)).signals === 1);
      expect(await handle.query(stateQuery)).toMatchObject({ rounds, pendingWork: false });
      await handle.signal(reconcileSignal, {
        source: 'Deployment',
        event: 'updated',
        versions: [...versions, 'Deployment/50'],
      });
      await eventually(
        'a round for the foreign event',
        async () => (await handle.query(stateQuery)).rounds === rounds + 1,
      );
      await handle.terminate();
    });
  });

  it('coalesces a storm of signals that arrive during a round into one more round', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.applyDelayMs = 1500;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('the first round to apply', () => (cluster.calls.applyChildren ?? 0) >= 1);
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', resourceVersion: String(i) }),
        ),
      );
      await eventually('the storm to be handled', async () => {
        const s = await handle.query(stateQuery);
        return s.signals === 100 && !s.pendingWork && !s.roundInProgress;
      });
      const state = await handle.query(stateQuery);
      expect(state.signals).toBe(100);
      expect(state.rounds).toBeLessThanOrEqual(3);
      expect(cluster.calls.applyChildren).toBe(state.rounds);
      await handle.terminate();
    });
  });

  // Seen in bench:chaos (a model's workflow stuck after its second restart): the first worker to take a
  // task after a restart replayed the run and read the previous round's end at the new task's start, so
  // it decided the rate limit differently from any later replay, and every later task failed.
  it('decides the same on a worker that caches no run as any replay does (workflow time read at wakes)', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    const worker = await wf.worker(cluster.activities(), `wf-${Math.random().toString(36).slice(2)}`, {
      maxCachedWorkflows: 0,
    });
    const handle = await worker.runUntil(async () => {
      const h = await start(worker.options.taskQueue);
      await eventually('the first round done', async () => {
        const s = await h.query(stateQuery);
        return s.rounds === 1 && !s.roundInProgress;
      });
      // More than the rate limit's interval after that round, a change: the next task replays the run.
      await sleep(1_500);
      await h.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', resourceVersion: '900' });
      await eventually('the second round done', async () => {
        const s = await h.query(stateQuery);
        return s.rounds === 2 && !s.roundInProgress;
      });
      return h;
    });
    const history = await handle.fetchHistory();
    const options = {
      workflowBundle: { code: inject('workflowBundleCode') },
      sinks: new ReconcileMetrics(new Registry()).sinks(),
    } as ReplayWorkerOptions;
    await Worker.runReplayHistory(options, history, handle.workflowId);
    await handle.terminate();
  });

  it('continues as new after maxRoundsPerRun, carrying its state', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { maxRoundsPerRun: 2 });
      for (let i = 0; i < 5; i++) {
        await handle.executeUpdate(reconcileNowUpdate, { args: [{}] }).catch(() => undefined);
      }
      await eventually(
        'several runs',
        async () => (await wf.env.client.workflow.getHandle(handle.workflowId).query(stateQuery)).runs >= 3,
      );
      const state = await wf.env.client.workflow.getHandle(handle.workflowId).query(stateQuery);
      expect(state.rounds).toBeGreaterThanOrEqual(5);
      expect(state.uid).toBe('uid-1');
      expect(state.phase).toBe('Ready');
      const first = await wf.env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).describe();
      expect(first.status.name).toBe('CONTINUED_AS_NEW');
      // mmctl history reads the rounds back across the runs, oldest first.
      const rounds = await roundsOfWorkflow(wf.env.client, handle.workflowId, 100);
      expect(rounds.length).toBe(state.rounds);
      expect(rounds[0]!.runId).toBe(handle.firstExecutionRunId);
      // Every run but a quiet last one (waiting for its next check) holds rounds.
      expect(new Set(rounds.map((r) => r.runId)).size).toBeGreaterThanOrEqual(state.runs - 1);
      expect(new Set(rounds.map((r) => r.runId)).size).toBeGreaterThanOrEqual(2);
      expect(rounds.slice(1).every((r) => r.triggers.length > 0)).toBe(true);
      expect((await roundsOfWorkflow(wf.env.client, handle.workflowId, 3)).map((r) => r.startedAt)).toEqual(
        rounds.slice(-3).map((r) => r.startedAt),
      );
      await wf.env.client.workflow.getHandle(handle.workflowId).terminate();
    });
  });

  it('keeps each run of an idle model within 12 hours, whatever the drift-check period', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      // Two days idle: drift checks about 10 hours apart (the default), each run ending before 12 hours.
      await wf.env.sleep('48 hours');
      const latest = wf.env.client.workflow.getHandle(handle.workflowId);
      const state = await latest.query(stateQuery);
      expect(state.rounds).toBeGreaterThanOrEqual(5);
      expect(state.runs).toBeGreaterThanOrEqual(3);
      const first = wf.env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
      const { status, startTime, closeTime } = await first.describe();
      expect(status.name).toBe('CONTINUED_AS_NEW');
      expect(closeTime!.getTime() - startTime.getTime()).toBeLessThanOrEqual(12 * 3600_000);
      const { events } = await first.fetchHistory();
      expect(patchMarkersOf({ events: (events ?? []) as RecordedHistory['events'] })).toEqual(['stable-clock']);
      await latest.terminate();
    });
  });

  it('reads and applies in one step when the round can only apply, and reads alone when it must decide first', async () => {
    const cluster = new FakeCluster();
    cluster.gatewayConfigured = true;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Deploying', () => cluster.status?.phase === 'Deploying');
      await eventually('the first round done', async () => !(await handle.query(stateQuery)).roundInProgress);
      cluster.ready = true;
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated', resourceVersion: '7' });
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      await eventually('the second round done', async () => !(await handle.query(stateQuery)).roundInProgress);
      const { events } = await handle.fetchHistory();
      // The first round adds the finalizer before anything is applied; the second only applies.
      expect(localActivitiesOf({ events: (events ?? []) as RecordedHistory['events'] })).toEqual([
        'readAndApply',
        'ensureFinalizer',
        'applyChildren',
        'writeStatus',
        'readAndApply',
        'registerRoute',
        'writeStatus',
      ]);
      expect(cluster.calls).toMatchObject({ readModel: 2, applyChildren: 2 });
      await handle.terminate();
    });
  });

  it('without a gateway, a round that only applies is one step: read, apply and status', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('the first round done', async () => (await handle.query(stateQuery)).phase === 'Deploying');
      cluster.ready = true;
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated', resourceVersion: '7' });
      await eventually('the workflow to see Ready', async () => (await handle.query(stateQuery)).phase === 'Ready');
      const { events } = await handle.fetchHistory();
      expect(localActivitiesOf({ events: (events ?? []) as RecordedHistory['events'] })).toEqual([
        'readAndApply',
        'readAndApply',
      ]);
      expect(cluster.verdicts).toEqual(['progressing', 'ready']);
      expect(cluster.status?.inferenceURL).toBe('http://m.default.svc.cluster.local:80');
      // The round's record reads the status from the step's result, as it would from a status step.
      const rounds = await roundsOfWorkflow(wf.env.client, handle.workflowId, 10);
      expect(rounds.map((r) => [r.phaseBefore, r.phaseAfter])).toEqual([
        [undefined, 'Deploying'],
        ['Deploying', 'Ready'],
      ]);
      expect(rounds[1]?.steps).toContain('status Deploying → Ready · 1 of 1 ready, 1 updated');
      await handle.terminate();
    });
  });

  it('writes the status as a step of its own when the read step could not', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.statusTransientFailures = 1;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('the workflow to see Ready', async () => (await handle.query(stateQuery)).phase === 'Ready');
      const { events } = await handle.fetchHistory();
      expect(localActivitiesOf({ events: (events ?? []) as RecordedHistory['events'] })).toEqual([
        'readAndApply',
        'writeStatus',
      ]);
      expect(cluster.calls.writeStatus).toBe(2);
      await handle.terminate();
    });
  });

  it('retries a step whose local attempt failed in a way worth retrying as a regular activity', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.applyTransientFailures = 2;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await eventually('Ready', () => cluster.status?.phase === 'Ready');
      // One local attempt, then the regular activity's first attempt fails and its second succeeds.
      expect(cluster.calls.applyChildren).toBe(3);
      const { events } = await handle.fetchHistory();
      const scheduled = (events ?? []).filter((e) => e.activityTaskScheduledEventAttributes);
      expect(scheduled.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)).toEqual([
        'applyChildren',
      ]);
      await handle.terminate();
    });
  });
});
