// The operator process: the thin informer and the Temporal worker, each optional by role.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { CaddyDriver } from '../activities/gateway/caddy.js';
import type { GatewayDriver } from '../activities/gateway/driver.js';
import { GatewayApiDriver } from '../activities/gateway/gateway-api.js';
import { createActivities } from '../activities/index.js';
import { KubeClient } from '../activities/kube-client.js';
import { janitorWorkflowId, janitorWorkflowType, type JanitorInput } from '../workflows/definitions.js';
import type { GatewayConfig, OperatorConfig } from './plumbing/config.js';
import { Informer } from './informer/informer.js';
import { createMetrics, serveMetrics } from './plumbing/metrics.js';
import { Signaler } from './informer/signaler.js';
import { connectClient, connectWorker } from './plumbing/temporal.js';
import { workflowSender } from './informer/workflow-client.js';

/**
 * Compiled (dist/src/operator.js, as the image runs it): the workflow bundle that `npm run build`
 * wrote beside it. From source (tsx, as `npm start` runs it): the workflow code, bundled at start.
 */
function workflowSource(): { workflowBundle: { codePath: string } } | { workflowsPath: string } {
  if (import.meta.url.endsWith('.ts')) {
    return { workflowsPath: fileURLToPath(new URL('../workflows/index.ts', import.meta.url)) };
  }
  const codePath = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));
  if (!existsSync(codePath)) throw new Error(`the workflow bundle ${codePath} is missing: run npm run build`);
  return { workflowBundle: { codePath } };
}

export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}

function gatewayDriver(config: GatewayConfig, kube: KubeClient): GatewayDriver | undefined {
  switch (config.kind) {
    case 'caddy':
      return new CaddyDriver(config);
    case 'gateway-api':
      return new GatewayApiDriver(kube, config);
    case 'none':
      return undefined;
  }
}

export interface RunningOperator {
  /** Stops watching, delivers or hands back pending work, lets in-flight tasks finish; resolves when stopped. */
  stop(): Promise<void>;
  /** Resolves when the worker stops (on its own: a fatal error). */
  done: Promise<void>;
  informer?: Informer;
  signaler?: Signaler;
}

export async function startOperator(config: OperatorConfig, log: Logger): Promise<RunningOperator> {
  const kc = loadKubeConfig(config.kubeconfig);
  const cleanups: (() => Promise<void>)[] = [];
  let markStopped!: () => void;
  // Without a worker, the process is done when it is told to stop.
  let done = new Promise<void>((resolve) => (markStopped = resolve));
  let informer: Informer | undefined;
  let signaler: Signaler | undefined;

  if (config.role !== 'informer') {
    const workflows = workflowSource();
    const connection = await connectWorker(config.temporal);
    const kube = new KubeClient(kc);
    const worker = await Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      ...workflows,
      activities: createActivities({ kube, build: config.build, gateway: gatewayDriver(config.gateway, kube) }),
      maxConcurrentActivityTaskExecutions: config.maxConcurrentActivities,
      maxConcurrentWorkflowTaskExecutions: config.maxConcurrentWorkflowTasks,
      shutdownGraceTime: '10 seconds',
    });
    done = worker.run().finally(() => connection.close());
    cleanups.push(async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    });
    log.info({ taskQueue: config.temporal.taskQueue, namespace: config.temporal.namespace }, 'worker running');
  }

  if (config.role !== 'worker') {
    const connection = await connectClient(config.temporal);
    const client = new Client({ connection, namespace: config.temporal.namespace });
    signaler = new Signaler(
      workflowSender(client, { taskQueue: config.temporal.taskQueue, workflow: config.workflow }),
      log,
    );
    const s = signaler;
    informer = new Informer(kc, (r) => s.enqueue(r), log, {
      namespaces: config.namespaces,
      watchHttpRoutes: config.gateway.kind === 'gateway-api',
      watchTimeoutSeconds: config.watchTimeoutSeconds,
    });
    const i = informer;
    // Informer first, so no new work is queued while the signaler drains.
    cleanups.unshift(async () => {
      await i.stop();
      await s.stop();
      await connection.close();
    });
    if (config.gateway.kind !== 'none') {
      // Idempotent across replicas: the one janitor keeps running, the others' starts are no-ops.
      const input: JanitorInput = { intervalSeconds: config.gatewaySweepSeconds };
      await client.workflow.start(janitorWorkflowType, {
        workflowId: janitorWorkflowId(config.temporal.taskQueue),
        taskQueue: config.temporal.taskQueue,
        args: [input],
        workflowIdConflictPolicy: 'USE_EXISTING',
        staticSummary: 'removes gateway routes whose MachineModel is gone',
      });
    }
    await informer.start();
    log.info({ namespaces: config.namespaces.length ? config.namespaces : 'all' }, 'informer synced');
  }

  if (config.metrics.port) {
    const server = await serveMetrics(createMetrics({ informer, signaler }), config.metrics.port, config.metrics.host);
    cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
    log.info({ port: config.metrics.port }, 'serving /metrics');
  }

  return {
    informer,
    signaler,
    done,
    async stop() {
      for (const cleanup of cleanups) await cleanup();
      markStopped();
    },
  };
}
