// A time-skipping Temporal test server and the workflow bundle, for the workflow tests: real workflow
// code, stubbed activities (a FakeCluster).
import { randomUUID } from 'node:crypto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, inject } from 'vitest';
import { ReconcileMetrics } from '../../src/process/reconcile-metrics.js';
import type { FakeCluster } from './fake-cluster.js';
import { registerSearchAttributes } from './temporal.js';
import { workflowIdFor } from '../../src/core/api.js';
import type { WorkflowConfig } from '../../src/core/reconcile-timing.js';
import type { MachineModelWorkflowInput } from '../../workflows/definitions.js';

export interface WorkflowTestEnv {
  env: TestWorkflowEnvironment;
  /** Runs `fn` with a worker on a task queue of its own; `metrics` is the registry its metrics land in. */
  withWorker(cluster: FakeCluster, fn: (taskQueue: string, metrics: Registry) => Promise<void>): Promise<void>;
  /** A worker, not yet running, on `taskQueue` with `activities`, set up as withWorker's but for `options`. */
  worker(activities: object, taskQueue: string, options?: Partial<WorkerOptions>): Promise<Worker>;
}

/** One environment for the test file: created before its tests, torn down after them. */
export function useWorkflowTestEnv(): WorkflowTestEnv {
  let created: (WorkflowTestEnv & { teardown(): Promise<void> }) | undefined;
  beforeAll(async () => {
    created = await workflowTestEnv();
  });
  afterAll(async () => {
    await created?.teardown();
  });
  return {
    get env() {
      return created!.env;
    },
    withWorker: (cluster, fn) => created!.withWorker(cluster, fn),
    worker: (activities, taskQueue, options) => created!.worker(activities, taskQueue, options),
  };
}

async function workflowTestEnv(): Promise<WorkflowTestEnv & { teardown(): Promise<void> }> {
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: inject('timeSkippingServer') } },
  });
  await registerSearchAttributes(env.connection);
  const workflowBundle = { code: inject('workflowBundleCode') };
  const createWorker = (activities: object, taskQueue: string, options: Partial<WorkerOptions>, registry: Registry) => {
    const metrics = new ReconcileMetrics(registry);
    return Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle,
      activities,
      // The workflow reports its rounds to this sink and its steps to this interceptor, as the operator's.
      sinks: metrics.sinks(),
      interceptors: { activity: [metrics.activityInterceptor()] },
      ...options,
    });
  };
  return {
    env,
    async withWorker(cluster, fn) {
      const taskQueue = `wf-${randomUUID()}`;
      const registry = new Registry();
      const worker = await createWorker(cluster.activities(), taskQueue, {}, registry);
      await worker.runUntil(fn(taskQueue, registry));
    },
    worker: (activities, taskQueue, options = {}) => createWorker(activities, taskQueue, options, new Registry()),
    teardown: () => env.teardown(),
  };
}

/** Starts the workflow of model default/m on `taskQueue`, under an id of its own. */
export function startModelWorkflow(
  env: TestWorkflowEnvironment,
  taskQueue: string,
  config: Partial<WorkflowConfig> = {},
) {
  const input: MachineModelWorkflowInput = { namespace: 'default', name: 'm', config };
  return env.client.workflow.start('machineModelWorkflow', {
    taskQueue,
    workflowId: `${workflowIdFor('default', 'm')}-${randomUUID()}`,
    args: [input],
  });
}
