// The canary rollout workflow on the time-skipping server, with stubbed activities (FakeCluster):
// every path a rollout can take, and what people see and can do while it runs.
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { RolloutSpec } from '../../src/core/api.js';
import {
  abortUpdate,
  pauseUpdate,
  promoteUpdate,
  resumeUpdate,
  rolloutStateQuery,
  type CanaryRolloutInput,
  type RolloutResult,
} from '../../workflows/rollout-definitions.js';
import type { canaryRolloutWorkflow } from '../../workflows/canary-rollout.js';
import { FakeCluster } from '../support/fake-cluster.js';
import { useWorkflowTestEnv } from '../support/workflow-env.js';

const wf = useWorkflowTestEnv();

const plan: RolloutSpec = {
  strategy: 'Canary',
  steps: [
    { weight: 10, pause: '5m' },
    { weight: 50, pause: '10m' },
  ],
  analysis: { maxErrorRatePercent: 5, minRequests: 20 },
};

/** Starts a rollout as the child of the harness that plays the model's round; the rollout's handle. */
async function start(taskQueue: string, overrides: Partial<CanaryRolloutInput> = {}, harnessOptions = {}) {
  const input: CanaryRolloutInput = {
    ref: { namespace: 'default', name: 'm', uid: 'uid-1' },
    revision: { image: 'reg/m:v2', modelPath: '/models/v2' },
    stable: { image: 'reg/m:v1', modelPath: '/models/v1' },
    plan,
    stableReplicas: 4,
    ...overrides,
  };
  const rolloutId = `rollout-${randomUUID()}`;
  const harness = await wf.env.client.workflow.start('rolloutHarnessWorkflow', {
    taskQueue,
    workflowId: `harness-${rolloutId}`,
    args: [input, rolloutId, harnessOptions],
  });
  const firstRun = await eventuallyValue(
    async () => (await wf.env.client.workflow.getHandle(rolloutId).describe()).runId,
  );
  const rollout = wf.env.client.workflow.getHandle<typeof canaryRolloutWorkflow>(rolloutId, undefined, {
    firstExecutionRunId: firstRun,
  });
  // The result once the harness's last round (which removes a canary not promoted) is done too.
  return Object.assign(rollout, { firstExecutionRunId: firstRun, result: () => harness.result() });
}

/** The value once `read` stops throwing (the child not started yet). */
async function eventuallyValue<T>(read: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await read();
    } catch (err) {
      if (i > 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Lets workflow time pass (the server skips it), so the rollout moves while the test watches. */
const pass = (duration: string) => wf.env.sleep(duration);

describe('canaryRolloutWorkflow', () => {
  it('promotes a healthy canary after every step, moving its weight step by step', async () => {
    const cluster = new FakeCluster();
    cluster.canary.traffic = { requests: 0, errors: 0 };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('1 minute');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({
        phase: 'Progressing',
        step: 1,
        weight: 10,
        pauseSecondsLeft: expect.any(Number),
      });
      // The canary serves: 200 requests, 2 of them 5xx (1 %), in each step.
      cluster.canary.traffic = { requests: 200, errors: 2 };
      await pass('6 minutes');
      cluster.canary.traffic = { requests: 400, errors: 4 };
      const result: RolloutResult = await handle.result();
      expect(result).toMatchObject({ outcome: 'Promoted', message: 'every step passed (2)' });
      // Promoted: its share goes back to the stable revision, which the model's workflow moves to it.
      expect(cluster.canary.weights).toEqual([10, 50, 0]);
      // 10 % and 50 % of 4 stable replicas, rounded up.
      expect(cluster.canary.replicas).toBe(2);
      // The model's workflow makes the revision stable, then removes the canary.
      expect(cluster.canary.removed).toBe(0);
      expect(result.view.verdicts).toContain(
        'step 1 (10%): canary 1 of 1 ready; 2 of 200 requests answered 5xx (1%, at most 5%)',
      );
    });
  });

  it('rolls back at once when the canary starts crashing in a pause, naming the check', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('1 minute');
      cluster.canary.trouble = {
        kind: 'crash-loop',
        pods: 1,
        container: 'model',
        restarts: 2,
        lastReason: 'OOMKilled',
        exitCode: 137,
        memoryLimit: '1Gi',
      };
      const result = await handle.result();
      expect(result).toMatchObject({ outcome: 'RolledBack', check: 'Ready' });
      expect(result.message).toBe(
        'rolled back at step 1 (10%): canary not ready: container model keeps crashing (2 restarts, 1 pod): last killed for using more memory than its limit of 1Gi (OOMKilled)',
      );
      // All traffic back to stable before the canary goes.
      expect(cluster.canary.weights).toEqual([10, 0]);
      expect(cluster.canary.removed).toBe(1);
    });
  });

  it('asks again at its next look when the model did not answer its ask (bug: a lost ask left it waiting, then rolled back)', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      // The model's workflow never sees the rollout's first three reports: the ask (the canary's size
      // at step 1), the report that followed while its view changed (both, as when they came before
      // the model knew its rollout) and the first time it asks again, a minute later. Without asking
      // again, nothing more would come until the ready deadline.
      const handle = await start(tq, {}, { lose: 3 });
      await pass('4 minutes');
      expect(cluster.canary).toMatchObject({ exists: true, replicas: 1 });
      // Asked again, nothing was done twice: one share, once.
      expect(cluster.canary.weights).toEqual([10]);
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Progressing', step: 1, weight: 10 });
      await handle.terminate();
    });
  });

  it('never sends traffic to a canary that does not become ready', async () => {
    const cluster = new FakeCluster();
    cluster.canary.trouble = {
      kind: 'image-pull',
      pods: 1,
      container: 'model',
      image: 'reg/m:v2',
      reason: 'ImagePullBackOff',
      message: 'not found',
    };
    await wf.withWorker(cluster, async (tq) => {
      const result = await (await start(tq)).result();
      expect(result).toMatchObject({ outcome: 'RolledBack', check: 'Ready' });
      // The route never gave it a share.
      expect(cluster.canary.weights).toEqual([]);
    });
  });

  it('fails a canary that is still not ready when its step has waited 10 minutes, without traffic', async () => {
    const cluster = new FakeCluster();
    cluster.canary.ready = false;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('5 minutes');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({
        phase: 'Progressing',
        message: 'canary 0 of 1 ready',
      });
      const result = await handle.result();
      expect(result).toMatchObject({
        outcome: 'RolledBack',
        check: 'Ready',
        message: 'rolled back at step 1 (10%): canary not ready within 600 s: canary 0 of 1 ready',
      });
      expect(cluster.canary.weights).toEqual([]);
    });
  });

  it('never promotes a canary whose readiness fails during its pause: back to waiting, then rolled back (bug: it passed unjudged)', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { plan: { strategy: 'Canary', steps: [{ weight: 50, pause: '5m' }] } });
      await pass('1 minute');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Progressing', weight: 50 });
      // Its Pods still run, its probe fails: Caddy's canary server answers 502, nobody reports errors.
      cluster.canary.ready = false;
      const result = await handle.result();
      expect(result).toMatchObject({ outcome: 'RolledBack', check: 'Ready' });
      expect(result.message).toContain('canary not ready within 600 s');
      // Its share went back to the stable revision at the first look that found it not ready, and stayed there.
      expect(cluster.canary.weights).toEqual([50, 0]);
    });
  });

  it('takes its share back from a canary that turns unready in its pause at the next look, not at the pause end (bug: it kept the share for the whole pause)', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { plan: { strategy: 'Canary', steps: [{ weight: 50, pause: '10m' }] } });
      await pass('1 minute');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Progressing', weight: 50 });
      cluster.canary.ready = false;
      // The rollout looks every 30 s: within a minute the share is back, nine minutes before the pause ends.
      await pass('1 minute');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Progressing', step: 1, weight: 0 });
      expect(cluster.canary.weights).toEqual([50, 0]);
      // Ready again: the step starts over, its share and its whole pause.
      cluster.canary.ready = true;
      await pass('1 minute');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Progressing', step: 1, weight: 50 });
      expect(await handle.result()).toMatchObject({ outcome: 'Promoted' });
    });
  });

  it("rolls back when the canary's error rate over a step is too high, with the numbers", async () => {
    const cluster = new FakeCluster();
    cluster.canary.traffic = { requests: 1000, errors: 50 };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('1 minute');
      // 100 requests in the step, 9 of them 5xx: counted from the step's start, not since the canary began.
      cluster.canary.traffic = { requests: 1100, errors: 59 };
      const result = await handle.result();
      expect(result).toMatchObject({
        outcome: 'RolledBack',
        check: 'ErrorRate',
        message:
          'rolled back at step 1 (10%): canary error rate too high: 9 of 100 requests answered 5xx (9%, at most 5%)',
      });
      expect(cluster.canary.weights).toEqual([10, 0]);
    });
  });

  it("fails a canary that answers errors before its pause ends, counting across the gateway's counter restarts", async () => {
    const cluster = new FakeCluster();
    cluster.canary.traffic = { requests: 500, errors: 0, countedSince: 1 };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('1 minute');
      cluster.canary.traffic = { requests: 510, errors: 0, countedSince: 1 };
      await pass('1 minute');
      // Caddy reloaded its config (another model's route changed): its counters began again.
      cluster.canary.traffic = { requests: 12, errors: 6, countedSince: 2 };
      const result = await handle.result();
      expect(result).toMatchObject({
        outcome: 'RolledBack',
        check: 'ErrorRate',
        message:
          'rolled back at step 1 (10%): canary error rate too high: 6 of 22 requests answered 5xx (27.3%, at most 5%)',
      });
      // At the next look, not at the end of the 5-minute pause.
      const { startTime, closeTime } = await handle.describe();
      expect(closeTime!.getTime() - startTime.getTime()).toBeLessThan(4 * 60_000);
      expect(cluster.canary.weights).toEqual([10, 0]);
    });
  });

  it('with onFailure: Pause, holds for a person with the failing canary at no share, who tries the step again and then promotes', async () => {
    const cluster = new FakeCluster();
    cluster.canary.traffic = { requests: 0, errors: 0 };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { plan: { ...plan, onFailure: 'Pause' } });
      await pass('1 minute');
      cluster.canary.traffic = { requests: 100, errors: 50 };
      await pass('10 minutes');
      const held = await handle.query(rolloutStateQuery);
      // The failing canary takes no requests while it waits for a person.
      expect(held).toMatchObject({ phase: 'Paused', pausedBy: 'analysis', step: 1, weight: 0 });
      expect(held.message).toContain('50 of 100 requests answered 5xx');
      // Hours later, still held: a failed check never moves on by itself.
      await pass('3 hours');
      expect((await handle.query(rolloutStateQuery)).phase).toBe('Paused');

      const resumed = await handle.executeUpdate(resumeUpdate, { args: [{ by: 'alice' }] });
      expect(resumed.phase).toBe('Progressing');
      await pass('1 minute');
      // The step again from its start: ready, then its share.
      expect(cluster.canary.weights).toEqual([10, 0, 10]);
      const promoted = await handle.executeUpdate(promoteUpdate, { args: [{ by: 'alice' }] });
      expect(promoted.verdicts).toContain('promotion asked by alice');
      expect(await handle.result()).toMatchObject({ outcome: 'Promoted', message: 'promoted by a person at step 1' });
    });
  });

  it('leaves too few requests to judge to a person', async () => {
    const cluster = new FakeCluster();
    cluster.canary.traffic = { requests: 0, errors: 0 };
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('1 minute');
      cluster.canary.traffic = { requests: 3, errors: 0 };
      await pass('6 minutes');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({
        phase: 'Paused',
        pausedBy: 'analysis',
        message:
          'step 1 (10%): canary 1 of 1 ready; 3 requests in this step, fewer than the 20 needed to judge its error rate; promote, resume or abort',
      });
      await handle.executeUpdate(abortUpdate, { args: [{ by: 'bob' }] });
      expect(await handle.result()).toMatchObject({ outcome: 'Aborted', message: 'aborted by a person' });
      expect(cluster.canary.weights).toEqual([10, 0]);
      expect(cluster.canary.removed).toBe(1);
    });
  });

  it("pauses and resumes with the pause's time left kept", async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { plan: { strategy: 'Canary', steps: [{ weight: 20, pause: '10m' }] } });
      await pass('4 minutes');
      const paused = await handle.executeUpdate(pauseUpdate, { args: [{ by: 'carol' }] });
      expect(paused).toMatchObject({ phase: 'Paused', pausedBy: 'person' });
      const left = paused.pauseSecondsLeft!;
      expect(left).toBeGreaterThan(5 * 60);
      expect(left).toBeLessThanOrEqual(6 * 60 + 30);
      await pass('2 hours');
      expect((await handle.query(rolloutStateQuery)).pauseSecondsLeft).toBe(left);
      const resumed = await handle.executeUpdate(resumeUpdate, { args: [{ by: 'carol' }] });
      expect(resumed.phase).toBe('Progressing');
      expect(resumed.pauseSecondsLeft).toBe(left);
      expect(await handle.result()).toMatchObject({ outcome: 'Promoted' });
      expect(cluster.canary.weights).toEqual([20, 0]);
    });
  });

  it('keeps its runs short: a run a step, and a new run every 6 hours while it waits for a person', async () => {
    const cluster = new FakeCluster();
    cluster.canary.traffic = { requests: 0, errors: 0 };
    await wf.withWorker(cluster, async (tq) => {
      // Looks every 10 minutes, so that two days pass in few workflow tasks.
      const handle = await start(tq, { checkSeconds: 600 });
      const runOf = async () => (await handle.describe()).runId;
      await pass('1 minute');
      expect(await runOf()).toBe(handle.firstExecutionRunId);
      const held = await handle.executeUpdate(pauseUpdate, { args: [{ by: 'dave' }] });
      const left = held.pauseSecondsLeft!;
      // Paused for 14 hours: a new run every 6 hours, the pause's time left kept across them.
      const runs = [await runOf()];
      for (let i = 0; i < 2; i++) {
        await pass('7 hours');
        runs.push(await runOf());
      }
      expect(new Set(runs).size).toBe(3);
      // Each run lived its 6 hours (and a look), no less: it continues as new when due, not at every hold.
      const second = await wf.env.client.workflow.getHandle(handle.workflowId, runs[1]).describe();
      const lived = (second.closeTime!.getTime() - second.startTime.getTime()) / 3_600_000;
      expect(lived).toBeGreaterThanOrEqual(6);
      expect(lived).toBeLessThan(6.2);
      expect(await handle.query(rolloutStateQuery)).toMatchObject({
        phase: 'Paused',
        step: 1,
        weight: 10,
        pauseSecondsLeft: left,
      });
      await handle.executeUpdate(resumeUpdate, { args: [{ by: 'dave' }] });
      cluster.canary.traffic = { requests: 100, errors: 0 };
      // The second step starts in a run of its own.
      await pass('6 minutes');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ step: 2, weight: 50 });
      expect(runs).not.toContain(await runOf());
      cluster.canary.traffic = { requests: 200, errors: 0 };
      const result = await handle.result();
      expect(result).toMatchObject({ outcome: 'Promoted', message: 'every step passed (2)' });
      expect(cluster.canary.weights).toEqual([10, 50, 0]);
    });
  });

  it('paused while its canary still loads, waits for the person across runs without judging it', async () => {
    const cluster = new FakeCluster();
    cluster.canary.ready = false;
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('30 seconds');
      await handle.executeUpdate(pauseUpdate, { args: [{ by: 'erin' }] });
      // 13 hours, far past the 600 s ready deadline: still paused by the person, not rolled back.
      await pass('13 hours');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Paused', pausedBy: 'person', weight: 0 });
      expect((await handle.describe()).runId).not.toBe(handle.firstExecutionRunId);
      // Resumed, a whole ready deadline again: ready in a minute, it goes on.
      await handle.executeUpdate(resumeUpdate, { args: [{ by: 'erin' }] });
      cluster.canary.ready = true;
      await pass('1 minute');
      expect(await handle.query(rolloutStateQuery)).toMatchObject({ phase: 'Progressing', weight: 10 });
      expect(cluster.canary.weights).toEqual([10]);
      // Left running, its timers would hold the test server's clock for the tests after it.
      await handle.terminate();
    });
  });

  it("ends at once when cancelled (a newer revision, or the model deleted): the model's round withdraws and removes the canary", async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await pass('1 minute');
      await handle.cancel();
      await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
      expect(cluster.canary.weights).toEqual([10, 0]);
      expect(cluster.canary.removed).toBe(1);
    });
  });

  it('ends at once when started by anything but a model workflow: nobody would carry out its asks', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (taskQueue) => {
      const handle = await wf.env.client.workflow.start('canaryRolloutWorkflow', {
        taskQueue,
        workflowId: `rollout-${randomUUID()}`,
        args: [
          {
            ref: { namespace: 'default', name: 'm', uid: 'uid-1' },
            revision: { image: 'evil.example/miner:1', modelPath: '/m' },
            stable: { image: 'reg/m:v1', modelPath: '/models/v1' },
            plan,
            stableReplicas: 4,
          },
        ],
      });
      const failed = await handle.result().catch((err: unknown) => err);
      expect(failed).toBeInstanceOf(WorkflowFailedError);
      expect((failed as WorkflowFailedError).cause?.message).toContain("runs only as its model's workflow's child");
      expect(cluster.calls.canaryHealth ?? 0).toBe(0);
    });
  });

  it('refuses commands once the rollout has ended', async () => {
    const cluster = new FakeCluster();
    await wf.withWorker(cluster, async (tq) => {
      const handle = await start(tq, { plan: { strategy: 'Canary', steps: [{ weight: 20 }] } });
      expect(await handle.result()).toMatchObject({ outcome: 'Promoted' });
      // A completed workflow takes no updates at all; the validator covers the instant before it completes.
      await expect(handle.executeUpdate(abortUpdate, { args: [{}] })).rejects.toThrow();
    });
  });
});
