import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Activities, ModelSnapshot } from '../../activities/index.js';
import { finalizerName, workflowIdFor, type MachineModelSpec, type MachineModelStatus } from '../../src/core/api.js';
import { computeStatus, type Readiness } from '../../src/core/status.js';
import { validateSpec } from '../../src/core/validation.js';
import { registerSearchAttributes } from '../support/temporal.js';
import {
  deletedSignal,
  reconcileNowUpdate,
  reconcileSignal,
  stateQuery,
  type MachineModelWorkflowInput,
} from '../../workflows/definitions.js';
import type { WorkflowConfig } from '../../src/core/reconcile-timing.js';

/** An in-memory MachineModel and Deployment that the stubbed activities read and write. */
class FakeCluster {
  exists = true;
  uid = 'uid-1';
  generation = 1;
  deleting = false;
  finalizers: string[] = [];
  spec: MachineModelSpec = {
    image: 'registry.example/m:1',
    modelPath: '/models/m',
    resources: { cpu: '1', memory: '1Gi' },
  };
  ready = false;
  status: MachineModelStatus | undefined;
  verdicts: string[] = [];
  calls: Record<string, number> = {};
  eventReasons: string[] = [];
  applyFailure: ApplicationFailure | undefined;
  /** Makes applyChildren take real time, so signals can arrive while a round runs. */
  applyDelayMs = 0;
  /** The same for removeFinalizer, the last step of a deletion round. */
  removeFinalizerDelayMs = 0;
  gatewayConfigured = false;
  gatewayDown = false;
  /** Route ids (uids) on the fake gateway. */
  routes = new Set<string>();

  private count(name: string) {
    this.calls[name] = (this.calls[name] ?? 0) + 1;
  }

  activities(): Activities {
    const ref = () => ({ namespace: 'default', name: 'm', uid: this.uid });
    const readiness = (): Readiness => ({
      found: true,
      desiredReplicas: 1,
      replicas: 1,
      readyReplicas: this.ready ? 1 : 0,
      availableReplicas: this.ready ? 1 : 0,
      updatedReplicas: 1,
      observedLatest: true,
      available: { status: this.ready ? 'True' : 'False', reason: 'MinimumReplicasAvailable', message: '' },
    });
    return {
      readModel: async (): Promise<ModelSnapshot | null> => {
        this.count('readModel');
        if (!this.exists) return null;
        return {
          ref: ref(),
          generation: this.generation,
          deleting: this.deleting,
          hasFinalizer: this.finalizers.includes(finalizerName),
          spec: this.spec,
          specErrors: validateSpec(this.spec),
        };
      },
      ensureFinalizer: async () => {
        this.count('ensureFinalizer');
        this.finalizers.push(finalizerName);
        return { added: true };
      },
      applyChildren: async () => {
        this.count('applyChildren');
        if (this.applyDelayMs) await new Promise((r) => setTimeout(r, this.applyDelayMs));
        if (this.applyFailure) throw this.applyFailure;
        return {
          changes: [],
          inferenceURL: 'http://m.default.svc.cluster.local:80',
          selector: 'app=m',
          autoscaler: false,
        };
      },
      observeReadiness: async () => {
        this.count('observeReadiness');
        return readiness();
      },
      writeStatus: async (_ref, input) => {
        this.count('writeStatus');
        this.verdicts.push(input.verdict.kind);
        this.status = computeStatus(this.status, { ...input, now: new Date().toISOString() });
        return { phase: this.status.phase, conditions: this.status.conditions ?? [], changed: true };
      },
      removeFinalizer: async () => {
        this.count('removeFinalizer');
        if (this.removeFinalizerDelayMs) await new Promise((r) => setTimeout(r, this.removeFinalizerDelayMs));
        this.finalizers = this.finalizers.filter((f) => f !== finalizerName);
        if (this.deleting) this.exists = false;
        return { removed: true };
      },
      recordModelEvent: async (_ref, _type, reason) => {
        this.count('recordModelEvent');
        this.eventReasons.push(reason);
      },
      registerRoute: async (snap) => {
        this.count('registerRoute');
        if (!this.gatewayConfigured) return { configured: false, registered: false, changes: [] };
        if (this.gatewayDown)
          throw ApplicationFailure.retryable('Caddy admin API is unreachable', 'GatewayUnavailable');
        this.routes.add(snap.ref.uid);
        const url = 'http://gateway.example/models/default/m';
        return {
          configured: true,
          registered: true,
          url,
          changes: [],
          condition: { type: 'GatewayRegistered', status: 'True', reason: 'Registered', message: url },
        };
      },
      unregisterRoute: async (r) => {
        this.count('unregisterRoute');
        if (this.gatewayConfigured && this.gatewayDown)
          throw ApplicationFailure.retryable('Caddy admin API is unreachable', 'GatewayUnavailable');
        return { removed: this.routes.delete(r.uid) };
      },
      inspectGateway: async () => ({ orphans: [], collisions: [], unpublished: [] }),
      removeOrphanRoute: async () => ({ removed: false }),
      removeCollidingRoute: async () => ({ removed: false }),
    };
  }
}

let env: TestWorkflowEnvironment;
let workflowBundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: inject('timeSkippingServer') } },
  });
  await registerSearchAttributes(env.connection);
  workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('../../workflows/index.ts', import.meta.url)),
    logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
  });
});

afterAll(async () => {
  await env?.teardown();
});

async function withWorker(cluster: FakeCluster, fn: (taskQueue: string) => Promise<void>) {
  const taskQueue = `wf-${randomUUID()}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle,
    activities: cluster.activities(),
  });
  await worker.runUntil(fn(taskQueue));
}

function start(taskQueue: string, config: Partial<WorkflowConfig> = {}) {
  const input: MachineModelWorkflowInput = { namespace: 'default', name: 'm', config };
  return env.client.workflow.start('machineModelWorkflow', {
    taskQueue,
    workflowId: `${workflowIdFor('default', 'm')}-${randomUUID()}`,
    args: [input],
  });
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('machineModelWorkflow', () => {
  it('adds the finalizer, applies children and reports Ready', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('Ready', () => cluster.status?.phase === 'Ready');
      expect(cluster.finalizers).toEqual([finalizerName]);
      expect(cluster.status?.inferenceURL).toBe('http://m.default.svc.cluster.local:80');
      // The fake holds the status as soon as the activity ran; the workflow learns it a moment later.
      await until('the workflow to see Ready', async () => (await handle.query(stateQuery)).phase === 'Ready');
      expect((await handle.query(stateQuery)).uid).toBe('uid-1');
      await handle.terminate();
    });
  });

  it('coalesces a storm of signals that arrive during a round into one more round', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.applyDelayMs = 1500;
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('the first round to apply', () => (cluster.calls.applyChildren ?? 0) >= 1);
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', resourceVersion: String(i) }),
        ),
      );
      await until('the storm to be handled', async () => {
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

  it('fails with ProgressDeadlineExceeded when not ready in time, and recovers when ready', async () => {
    const cluster = new FakeCluster();
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq, { progressDeadlineSeconds: 600 });
      await until('Deploying', () => cluster.status?.phase === 'Deploying');
      await env.sleep('11 minutes');
      await until('Failed', () => cluster.status?.phase === 'Failed');
      const ready = cluster.status?.conditions?.find((c) => c.type === 'Ready');
      expect(ready?.reason).toBe('ProgressDeadlineExceeded');
      expect(ready?.message).toMatch(/not ready within 600s/);
      cluster.ready = true;
      await handle.signal(reconcileSignal, { source: 'Deployment', event: 'updated' });
      await until('Ready again', () => cluster.status?.phase === 'Ready');
      await handle.terminate();
    });
  });

  it('continues as new after maxRoundsPerRun, carrying its state', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq, { maxRoundsPerRun: 2 });
      for (let i = 0; i < 5; i++) {
        await handle.executeUpdate(reconcileNowUpdate, { args: [{}] }).catch(() => undefined);
      }
      await until(
        'several runs',
        async () => (await env.client.workflow.getHandle(handle.workflowId).query(stateQuery)).runs >= 3,
      );
      const state = await env.client.workflow.getHandle(handle.workflowId).query(stateQuery);
      expect(state.rounds).toBeGreaterThanOrEqual(5);
      expect(state.uid).toBe('uid-1');
      expect(state.phase).toBe('Ready');
      const first = await env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).describe();
      expect(first.status.name).toBe('CONTINUED_AS_NEW');
      await env.client.workflow.getHandle(handle.workflowId).terminate();
    });
  });

  it('runs deletion while waiting for readiness, removes the finalizer and completes', async () => {
    const cluster = new FakeCluster();
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('Deploying', () => cluster.status?.phase === 'Deploying');
      cluster.deleting = true;
      await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
      const outcome = await handle.result();
      expect(outcome.finished).toBe(true);
      expect(cluster.verdicts).toContain('deleting');
      expect(cluster.calls.removeFinalizer).toBe(1);
      expect(cluster.exists).toBe(false);
    });
  });

  for (const [who, uid, expected] of [
    ['its own object', 'uid-1', 'COMPLETED'],
    ['a new object of the same name', 'uid-2', 'CONTINUED_AS_NEW'],
  ] as const) {
    it(`after the deletion round, signals about ${who} end in ${expected}`, async () => {
      const cluster = new FakeCluster();
      cluster.ready = true;
      cluster.removeFinalizerDelayMs = 1_000;
      await withWorker(cluster, async (tq) => {
        const handle = await start(tq);
        await until('Ready', () => cluster.status?.phase === 'Ready');
        cluster.deleting = true;
        await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', uid: 'uid-1' });
        await until('the finalizer being removed', () => (cluster.calls.removeFinalizer ?? 0) >= 1);
        // What the informer sends while the last round runs: the finalizer's removal, then the deletion.
        await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', uid });
        await handle.signal(deletedSignal, { uid: 'uid-1' });
        await handle.result();
        const firstRun = env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
        expect((await firstRun.describe()).status.name).toBe(expected);
      });
    });
  }

  it('publishes the route when Ready and, with the gateway down, keeps the finalizer until it returns', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    cluster.gatewayConfigured = true;
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('registered', () => cluster.routes.has('uid-1') && cluster.status?.gatewayURL !== undefined);
      expect(cluster.status?.conditions?.find((c) => c.type === 'GatewayRegistered')?.status).toBe('True');

      cluster.gatewayDown = true;
      cluster.deleting = true;
      await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated' });
      // The condition is written before the Event is recorded: wait for both, not one then the other.
      await until(
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
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('registered', () => cluster.routes.has('uid-1'));
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
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('Ready', () => cluster.status?.phase === 'Ready');
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
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('Failed', () => cluster.status?.phase === 'Failed');
      const ready = cluster.status?.conditions?.find((c) => c.type === 'Ready');
      expect(ready?.reason).toBe('NotOwned');
      expect(ready?.message).toContain('not owned by this MachineModel');
      expect(cluster.calls.applyChildren).toBe(1);
      await handle.terminate();
    });
  });

  it('reports an invalid spec as Failed and does not apply anything', async () => {
    const cluster = new FakeCluster();
    cluster.spec = { ...cluster.spec, resources: { cpu: 'lots', memory: '1Gi' } };
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('Failed', () => cluster.status?.phase === 'Failed');
      expect(cluster.status?.conditions?.find((c) => c.type === 'Ready')?.reason).toBe('InvalidSpec');
      expect(cluster.calls.applyChildren ?? 0).toBe(0);
      await handle.terminate();
    });
  });

  it('answers reconcileNow with the outcome of a fresh round', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    await withWorker(cluster, async (tq) => {
      const handle = await start(tq);
      await until('Ready', () => cluster.status?.phase === 'Ready');
      const before = (await handle.query(stateQuery)).rounds;
      const outcome = await handle.executeUpdate(reconcileNowUpdate, { args: [{ requestedBy: 'test' }] });
      expect(outcome.round).toBeGreaterThan(before);
      expect(outcome.phase).toBe('Ready');
      await handle.terminate();
    });
  });
});
