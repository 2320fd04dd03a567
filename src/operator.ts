// The operator process: the thin informer and the Temporal worker, each optional by role. It starts
// before what it depends on may answer: /healthz serves at once, and while Temporal or the apiserver
// does not answer the process waits for it (one log line, /readyz 503) instead of exiting.
import type { KubeConfig } from '@kubernetes/client-node';
import { Client } from '@temporalio/client';
import type http from 'node:http';
import type { Logger } from 'pino';
import { KubeClient } from '../activities/kube-client.js';
import { installQueues, shardOf } from './core/shards.js';
import { Informer } from './informer/informer.js';
import { Signaler } from './informer/signaler.js';
import type { OperatorConfig } from './process/config.js';
import { loadKubeConfig } from './process/kube-api.js';
import { createMetrics, serveEndpoints, type MetricSources } from './process/metrics.js';
import { ReconcileMetrics } from './process/reconcile-metrics.js';
import { Reachability, ReadyGate } from './process/ready-gate.js';
import { lazyClient, ProbeStreak, untilTemporalAnswers, watchTemporal } from './process/temporal.js';
import { QueueDrains } from './sharding/queue-drains.js';
import { takeShards } from './sharding/take-shards.js';
import { queueLayout, type QueueLayout } from './sharding/task-queues.js';
import { startGatewayJanitor } from './temporal/gateway-janitor.js';
import { SweepSchedule } from './temporal/sweep-schedule.js';
import { workflowSender } from './temporal/workflow-client.js';
import { runningOnQueueQuery } from './core/visibility-queries.js';
import type { WorkflowSweep } from './temporal/workflow-sweep.js';
import { Workers } from './worker/workers.js';

export interface RunningOperator {
  /** Stops watching, delivers or hands back pending work, lets in-flight tasks finish; resolves when stopped. */
  stop(): Promise<void>;
  /** Resolves when the worker stops on its own; rejects when the operator cannot start (a configuration error). */
  done: Promise<void>;
  /** Resolves once every part works: the informer has listed, the worker polls. */
  started: Promise<void>;
}

/** What `stop()` undoes, in this order: no new work is queued while in-flight work finishes. */
interface Parts {
  temporalWatch?: () => void;
  /** Lets go of the shards: their workers stop, then their Leases are freed. */
  shards?: () => Promise<void>;
  informer?: () => Promise<void>;
  worker?: () => Promise<void>;
  endpoints?: http.Server;
}

/** What the parts of one operator process share. */
interface Operator {
  config: OperatorConfig;
  log: Logger;
  kc: KubeConfig;
  /** Aborted by `stop()`: nothing is waited for any more. */
  signal: AbortSignal;
  readyGate: ReadyGate;
  /** Whether Temporal answers, for /readyz and the log. */
  temporal: Reachability;
  /** The worker connection's probes: whether this replica can work on shards (shard-assignment.ts). */
  probes: ProbeStreak;
  sources: MetricSources;
  parts: Parts;
  /** Settles `done`: the worker stopped, or the process cannot go on. */
  settle: { resolve: () => void; reject: (err: unknown) => void };
}

export function startOperator(config: OperatorConfig, log: Logger): RunningOperator {
  const kc = loadKubeConfig(config.kubeconfig);
  const abort = new AbortController();
  const readyGate = new ReadyGate();
  const temporal = new Reachability('temporal', `Temporal at ${config.temporal.address}`, readyGate, log);
  const sources: MetricSources = {};
  const registry = createMetrics(sources);
  const metrics = new ReconcileMetrics(registry);
  let settle!: Operator['settle'];
  const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  const parts: Parts = {};
  const op: Operator = {
    config,
    log,
    kc,
    signal: abort.signal,
    readyGate,
    temporal,
    probes: new ProbeStreak(),
    sources,
    parts,
    settle,
  };

  // With the informer in this process, the worker reads from its caches once it has listed.
  const kube = config.role !== 'informer' ? new KubeClient(kc) : undefined;
  if (kube) sources.reads = kube.reads;
  const workers =
    kube && new Workers({ config, kube, entry: import.meta.url, metrics, temporal, signal: abort.signal, log });

  const started = (async () => {
    if (config.metrics.port) {
      parts.endpoints = await serveEndpoints(registry, readyGate, config.metrics.port, config.metrics.host);
      log.info({ port: config.metrics.port }, 'serving /metrics, /healthz and /readyz');
    }
    await Promise.all([
      workers ? startWorker(op, workers) : undefined,
      config.role !== 'worker' ? startInformer(op, kube, workers) : undefined,
    ]);
  })();
  started.catch((err: unknown) => {
    if (!abort.signal.aborted) settle.reject(err);
  });

  return {
    done,
    started,
    async stop() {
      abort.abort();
      parts.temporalWatch?.();
      await parts.shards?.();
      await parts.informer?.();
      await parts.worker?.();
      const endpoints = parts.endpoints;
      if (endpoints) await new Promise<void>((resolve) => endpoints.close(() => resolve()));
      settle.resolve();
    },
  };
}

/** The base queue's worker; `done` settles when it stops. */
async function startWorker(op: Operator, workers: Workers): Promise<void> {
  const { config, log, readyGate, parts } = op;
  readyGate.waitFor('worker', 'the worker does not poll Temporal yet');
  const connection = await workers.connect();
  parts.temporalWatch = watchTemporal(connection, op.temporal, undefined, op.probes);
  const worker = await workers.startBase(connection);
  const run = worker.run().finally(() => connection.close());
  run.then(op.settle.resolve, op.settle.reject);
  parts.worker = async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await run.catch(() => undefined);
  };
  readyGate.ready('worker');
  log.info(
    {
      taskQueue: config.temporal.taskQueue,
      namespace: config.temporal.namespace,
      cachedWorkflows: worker.options.maxCachedWorkflows,
    },
    'worker running',
  );
}

/**
 * The informer, its signals, and the looks at the running workflows; with shards, the Leases that
 * scope it; with a gateway, the janitor. With a worker in this process (role all), the workflows on
 * another queue of the install than their own are moved there, and the queues the layout leaves
 * unpolled drained meanwhile.
 */
async function startInformer(op: Operator, kube: KubeClient | undefined, workers: Workers | undefined): Promise<void> {
  const { config, log } = op;
  const connection = lazyClient(config.temporal);
  const client = new Client({ connection, namespace: config.temporal.namespace });
  // Without a worker in this process, the informer's own connection tells whether Temporal answers.
  if (config.role === 'informer') op.parts.temporalWatch = watchTemporal(connection, op.temporal);
  const drains =
    workers &&
    new QueueDrains(
      {
        startWorker: (queue) => workers.startQueue(queue, true),
        running: async (queue) => (await client.workflow.count(runningOnQueueQuery(queue))).count,
      },
      log,
    );
  const queues = queueLayout(config.temporal.taskQueue, { count: config.sharding.shards, hash: config.sharding.hash });
  const signaler = new Signaler(
    workflowSender(client, {
      taskQueue: config.temporal.taskQueue,
      queueFor: queues.queueFor,
      workflow: config.workflow,
    }),
    log,
  );
  // The first signals go once this process's workers take their queue's workflows (sticky-redirect.ts).
  if (workers) signaler.holdUntil(workers.redirected);
  const informer = watchModels(op, signaler);
  let sweeps: SweepSchedule | undefined;
  op.parts.informer = async () => {
    sweeps?.stop();
    await drains?.stop();
    await informer.stop();
    await signaler.stop();
    await connection.close();
  };
  await informer.start();
  log.info({ namespaces: config.namespaces.length ? config.namespaces : 'all' }, 'informer synced');
  kube?.readFrom(informer);
  const sweep = workflowSweep(config, informer, queues, !!workers);
  sweeps = new SweepSchedule({
    client,
    sweep,
    temporal: op.temporal,
    signal: op.signal,
    log,
    drain: drains && ((queues) => drains.drain(queues)),
  });
  if (config.sharding.shards === 0) sweeps.sweep();
  else await takeShardsFor(op, { informer, signaler, sweeps, workers });
  if (config.gateway.kind !== 'none') {
    await untilTemporalAnswers(
      () => startGatewayJanitor(client, config.temporal.taskQueue, config.gatewaySweepSeconds),
      op.temporal,
      op.signal,
    );
  }
}

/** The informer, signalling through the signaler; its caches and counts are in the metrics. */
function watchModels(op: Operator, signaler: Signaler): Informer {
  const { config, kc, log } = op;
  const server = kc.getCurrentCluster()?.server ?? 'the configured server';
  const apiserver = new Reachability(
    'informer',
    `the Kubernetes API at ${server} (for the informer)`,
    op.readyGate,
    log,
    'the informer has not listed MachineModels and their children yet',
  );
  const { shards, hash } = config.sharding;
  const informer = new Informer(kc, (r) => signaler.enqueue(r), log, {
    namespaces: config.namespaces,
    watchHttpRoutes: config.gateway.kind === 'gateway-api',
    watchTimeoutSeconds: config.watchTimeoutSeconds,
    apiserver,
    maxStartingModels: config.maxStartingModels,
    holdDeletions: config.gateway.kind === 'none',
    // No shard until the Leases give some.
    shards: shards > 0 ? { count: shards, hash, owned: [] } : undefined,
  });
  Object.assign(op.sources, { informer, signaler, startGate: informer.startGate, deletions: informer.deletions });
  return informer;
}

/** What the looks at the running model workflows (src/temporal/workflow-sweep.ts) ask and tell. */
function workflowSweep(config: OperatorConfig, informer: Informer, queues: QueueLayout, moves: boolean): WorkflowSweep {
  const base = config.temporal.taskQueue;
  return {
    taskQueues: config.sharding.shards > 0 || moves ? installQueues(base) : [base],
    namespaces: config.namespaces,
    // 'unknown': another replica's shard, which its owner looks at.
    lookup: (ns, name) => {
      const model = informer.lookup('MachineModel', ns, name);
      return model === 'unknown' ? model : model ? 'present' : 'absent';
    },
    queueFor: moves ? (queues.queueFor ?? (() => base)) : undefined,
    polled: queues.polled,
    // As a watched deletion: held by the deletion lane while its namespace goes.
    enqueue: (r) => informer.tellDeleted(r),
  };
}

/** With --shards (which needs role all, so a worker): the informer, the signaler and the workers follow the Leases. */
async function takeShardsFor(
  op: Operator,
  {
    informer,
    signaler,
    sweeps,
    workers,
  }: { informer: Informer; signaler: Signaler; sweeps: SweepSchedule; workers?: Workers },
): Promise<void> {
  const { config } = op;
  const layout = { count: config.sharding.shards, hash: config.sharding.hash };
  const settings = { ...config.sharding, taskQueue: config.temporal.taskQueue, namespaces: config.namespaces };
  const shards = await takeShards(
    op.kc,
    settings,
    {
      serverSide: (serverSide) => (informer.serverSelector = serverSide),
      startWorker: (queue) => workers!.startQueue(queue),
      async reshard(owned) {
        await informer.reshard(owned);
        signaler.forget((ns) => !owned.includes(shardOf(ns, layout)));
      },
      // Every queue of the install, not only the shards held: a workflow keeps the queue it started
      // on until the sweep moves it, and after a change of layout that is not its namespace's
      // shard's. The informer says which models are its shards' ('unknown' for the rest).
      placed: () => void informer.listed().then(() => sweeps.sweep()),
      failed: (err) => op.settle.reject(err),
      contact: () => op.probes.contact(),
    },
    op.log,
  );
  op.sources.shards = shards;
  op.parts.shards = () => shards.leases.stop();
}
