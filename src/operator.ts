// The operator process: the thin informer and the Temporal worker, each optional by role. It starts
// before what it depends on may answer: /healthz serves at once, and while Temporal or the apiserver
// does not answer the process waits for it (one log line, /readyz 503) instead of exiting.
import type { KubernetesObject } from '@kubernetes/client-node';
import { existsSync } from 'node:fs';
import type http from 'node:http';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { WorkerStop } from '../activities/cancellation.js';
import { CaddyFleet } from '../activities/gateway/caddy-fleet.js';
import type { GatewayDriver } from '../activities/gateway/driver.js';
import { GatewayApiDriver } from '../activities/gateway/gateway-api-driver.js';
import { createActivities } from '../activities/index.js';
import { KubeClient } from '../activities/kube-client.js';
import { janitorWorkflowId, janitorWorkflowType, type JanitorInput } from '../workflows/definitions.js';
import type { GatewayConfig, OperatorConfig } from './process/config.js';
import { Informer } from './informer/informer.js';
import { cachedWorkflowsFor, heapLimitMiB } from './process/heap-bound.js';
import { createMetrics, serveEndpoints, type MetricSources } from './process/metrics.js';
import { ReconcileMetrics } from './process/reconcile-metrics.js';
import { Reachability, ReadyGate } from './process/ready-gate.js';
import { Signaler } from './informer/signaler.js';
import { lazyClient, ProbeStreak, untilTemporalAnswers, watchTemporal, workerConnector } from './process/temporal.js';
import { runningOnQueueQuery, sweepModelWorkflows } from './informer/workflow-sweep.js';
import { QueueDrains } from './process/queue-drains.js';
import { workflowBundleOptions } from './process/workflow-bundle.js';
import { workflowSender } from './informer/workflow-client.js';
import { installQueues, shardOf, shardTaskQueue } from './core/shards.js';
import { leasePrefixFor, ShardLeases } from './process/shard-leases.js';
import { ShardPlacement, type ShardWorker } from './process/shard-placement.js';
import { apiserverFiltersShards } from './informer/shard-scope.js';
import { apiMessage } from './process/kube-errors.js';

/**
 * Compiled (dist/src/operator.js, as the image runs it): the workflow bundle that `npm run build`
 * wrote beside it. From source (tsx, as `npm start` runs it): the workflow code, bundled at start.
 */
function workflowSource():
  { workflowBundle: { codePath: string } } | { workflowsPath: string; bundlerOptions: { preloadModules: string[] } } {
  if (import.meta.url.endsWith('.ts')) {
    const { workflowsPath, preloadModules } = workflowBundleOptions();
    return { workflowsPath, bundlerOptions: { preloadModules } };
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
      return new CaddyFleet(config, async (namespace, name) => {
        const service = await kube.read<KubernetesObject & { spec?: { clusterIP?: string } }>(
          'v1',
          'Service',
          namespace,
          name,
        );
        const ip = service?.spec?.clusterIP;
        return ip && ip !== 'None' ? ip : undefined;
      });
    case 'gateway-api':
      return new GatewayApiDriver(kube, config);
    case 'none':
      return undefined;
  }
}

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

/** How often the informer looks at every running model workflow besides (workflow-sweep.ts). */
const resweepEveryMs = 600_000;
/** A drain's workflow cache (src/process/queue-drains.ts): its workflows only pass through. */
const drainCachedWorkflows = 16;

export function startOperator(config: OperatorConfig, log: Logger): RunningOperator {
  const kc = loadKubeConfig(config.kubeconfig);
  const abort = new AbortController();
  const readyGate = new ReadyGate();
  const temporal = new Reachability('temporal', `Temporal at ${config.temporal.address}`, readyGate, log);
  /** The worker connection's probes: whether this replica can work on shards (shard-assignment.ts). */
  const probes = new ProbeStreak();
  const sources: MetricSources = {};
  const registry = createMetrics(sources);
  const reconcileMetrics = new ReconcileMetrics(registry);
  const parts: Parts = {};
  let settle!: { resolve: () => void; reject: (err: unknown) => void };
  const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));

  // With the informer in this process, the worker reads from its caches once it has listed.
  const workerKube = config.role !== 'informer' ? new KubeClient(kc) : undefined;
  if (workerKube) sources.reads = workerKube.reads;

  const sharded = config.sharding.shards > 0;
  let connected: ((connection: NativeConnection) => void) | undefined;
  /** The worker's connection, which the shards' workers share. */
  const workerConnection = new Promise<NativeConnection>((resolve) => (connected = resolve));

  function createWorker(
    connection: NativeConnection,
    taskQueue: string,
    activities: object,
    stop: WorkerStop | undefined,
    shutdown = { shutdownGraceTime: '10 seconds' } as {
      shutdownGraceTime: string;
      shutdownForceTime?: string;
      maxCachedWorkflows?: number;
    },
  ): Promise<Worker> {
    return Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue,
      ...workflowSource(),
      activities,
      interceptors: { activity: [reconcileMetrics.activityInterceptor(), ...(stop ? [stop.interceptor] : [])] },
      sinks: reconcileMetrics.sinks(),
      maxConcurrentActivityTaskExecutions: config.maxConcurrentActivities,
      maxConcurrentWorkflowTaskExecutions: config.maxConcurrentWorkflowTasks,
      maxConcurrentLocalActivityExecutions: config.maxConcurrentLocalActivities,
      maxCachedWorkflows: config.maxCachedWorkflows ?? cachedWorkflowsFor(heapLimitMiB(), config.maxStartingModels),
      stickyQueueScheduleToStartTimeout: `${config.stickyQueueTimeoutSeconds} seconds`,
      ...shutdown,
    });
  }

  let activities: object | undefined;

  async function startWorker(): Promise<void> {
    readyGate.waitFor('worker', 'the worker does not poll Temporal yet');
    const kube = workerKube!;
    activities = createActivities({ kube, build: config.build, gateway: gatewayDriver(config.gateway, kube) });
    const connection = await untilTemporalAnswers(workerConnector(config.temporal), temporal, abort.signal);
    parts.temporalWatch = watchTemporal(connection, temporal, undefined, probes);
    // The base queue's worker runs everywhere: the janitor, models started before sharding or by mmctl.
    // No stop of its own: the process ends with this worker, and its activities get the grace time.
    const worker = await untilTemporalAnswers(
      () => createWorker(connection, config.temporal.taskQueue, activities!, undefined),
      temporal,
      abort.signal,
    );
    connected?.(connection);
    const run = worker.run().finally(() => connection.close());
    run.then(settle.resolve, settle.reject);
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
   * A shard's worker, or a queue drain's (src/process/queue-drains.ts), sharing the worker connection
   * and the activities. It gives up after 30 s (Temporal away): the next placement tries again. It
   * stops within 6 s of being asked (src/core/shard-assignment.ts counts on it): in-flight tasks get
   * 4 s, then are cancelled.
   */
  async function startQueueWorker(queue: string, drain = false): Promise<ShardWorker> {
    const giveUp = AbortSignal.any([abort.signal, AbortSignal.timeout(30_000)]);
    giveUp.throwIfAborted();
    let onAbort: (() => void) | undefined;
    const connection = await Promise.race([
      workerConnection,
      new Promise<never>((_, reject) => {
        onAbort = () => reject(new Error('no worker connection to Temporal within 30 s'));
        giveUp.addEventListener('abort', onAbort, { once: true });
      }),
    ]).finally(() => giveUp.removeEventListener('abort', onAbort!));
    const stop = new WorkerStop();
    let created: Awaited<ReturnType<typeof createWorker>> | undefined;
    const worker = await untilTemporalAnswers(
      async () =>
        (created = await createWorker(connection, queue, activities!, stop, {
          shutdownGraceTime: '4 seconds',
          shutdownForceTime: '6 seconds',
          // A drain's workflows pass through to move: a small cache bounds what each drain holds.
          ...(drain ? { maxCachedWorkflows: drainCachedWorkflows } : {}),
        })),
      temporal,
      giveUp,
    ).catch(async (err: unknown) => {
      // Created as the start was given up: the retry drops it, but it holds the connection.
      if (created) {
        const run = created.run();
        try {
          if (created.getState() === 'RUNNING') created.shutdown();
        } finally {
          await run.catch(() => undefined);
        }
      }
      throw err;
    });
    // A worker that fails on its own stops its activities too.
    const run = worker.run().finally(() => stop.stop());
    return {
      run,
      async shutdown() {
        // Its activities end now, local ones too (the worker cancels neither in time): the shard's next
        // owner may write as soon as this worker is down.
        stop.stop();
        if (worker.getState() === 'RUNNING') worker.shutdown();
        // Forced down (shutdownForceTime): an activity ignored its cancellation and may still run.
        await run.catch((err: unknown) => log.error({ err, taskQueue: queue }, 'a worker was forced down'));
      },
    };
  }

  async function startInformer(): Promise<void> {
    const connection = lazyClient(config.temporal);
    const client = new Client({ connection, namespace: config.temporal.namespace });
    // Without a worker in this process, the informer's own connection tells whether Temporal answers.
    if (config.role === 'informer') parts.temporalWatch = watchTemporal(connection, temporal);
    const base = config.temporal.taskQueue;
    const { shards, hash, leaseNamespace, identity } = config.sharding;
    const layout = { count: shards, hash };
    const queueFor = sharded ? (namespace: string) => shardTaskQueue(base, shardOf(namespace, layout)) : undefined;
    // With a worker in this process, the workflows on another queue of the install than their own are
    // moved there, and the queues the layout leaves unpolled drained meanwhile.
    const moves = config.role === 'all';
    // The base queue and the current layout's shard queues (installQueues lists them in that order).
    const polledQueues = new Set(installQueues(base).slice(0, shards + 1));
    const drains = moves
      ? new QueueDrains(
          {
            startWorker: (queue) => startQueueWorker(queue, true),
            running: async (queue) => (await client.workflow.count(runningOnQueueQuery(queue))).count,
          },
          log,
        )
      : undefined;
    const signaler = new Signaler(
      workflowSender(client, { taskQueue: base, queueFor, workflow: config.workflow }),
      log,
    );
    const server = kc.getCurrentCluster()?.server ?? 'the configured server';
    const apiserver = new Reachability(
      'informer',
      `the Kubernetes API at ${server} (for the informer)`,
      readyGate,
      log,
      'the informer has not listed MachineModels and their children yet',
    );
    const informer = new Informer(kc, (r) => signaler.enqueue(r), log, {
      namespaces: config.namespaces,
      watchHttpRoutes: config.gateway.kind === 'gateway-api',
      watchTimeoutSeconds: config.watchTimeoutSeconds,
      apiserver,
      maxStartingModels: config.maxStartingModels,
      holdDeletions: config.gateway.kind === 'none',
      // No shard until the Leases give some.
      shards: sharded ? { ...layout, owned: [] } : undefined,
    });
    Object.assign(sources, { informer, signaler, startGate: informer.startGate, deletions: informer.deletions });
    let resweep: NodeJS.Timeout | undefined;
    parts.informer = async () => {
      clearInterval(resweep);
      await drains?.stop();
      await informer.stop();
      await signaler.stop();
      await connection.close();
    };
    await informer.start();
    log.info({ namespaces: config.namespaces.length ? config.namespaces : 'all' }, 'informer synced');
    workerKube?.readFrom(informer);
    // In the background: a visibility query need not hold the informer's readiness. One look at a
    // time; those asked for meanwhile are one look after it.
    const sweptQueues = sharded || moves ? installQueues(base) : [base];
    let sweeping: Promise<void> | undefined;
    let sweepAgain = false;
    const sweepOnce = () =>
      untilTemporalAnswers(
        () =>
          sweepModelWorkflows(client, {
            taskQueues: sweptQueues,
            namespaces: config.namespaces,
            // 'unknown': another replica's shard, which its owner looks at.
            lookup: (ns, name) => {
              const model = informer.lookup('MachineModel', ns, name);
              return model === 'unknown' ? model : model ? 'present' : 'absent';
            },
            queueFor: moves ? (queueFor ?? (() => base)) : undefined,
            polled: (queue) => polledQueues.has(queue),
            // As a watched deletion: held by the deletion lane while its namespace goes.
            enqueue: (r) => informer.tellDeleted(r),
          }),
        temporal,
        abort.signal,
      ).then(
        ({ vanished, moved, failed, stranded }) => {
          (failed ? log.warn : log.info).call(
            log,
            { vanished, moved, failed, stranded },
            'told the workflows of models deleted while no informer watched, and those on another queue than their own',
          );
          return drains?.drain(stranded);
        },
        () => undefined,
      );
    const sweepWorkflows = (): void => {
      if (sweeping) {
        sweepAgain = true;
        return;
      }
      sweeping = sweepOnce().finally(() => {
        sweeping = undefined;
        if (sweepAgain && !abort.signal.aborted) {
          sweepAgain = false;
          sweepWorkflows();
        }
      });
    };
    // And every 10 minutes: a move someone else sent (anyone who reaches Temporal can) is undone, and
    // a model whose deletion no watch saw is told, without waiting for a change of shards.
    resweep = setInterval(sweepWorkflows, resweepEveryMs);
    resweep.unref();
    if (!sharded) sweepWorkflows();
    else {
      // The selector goes to the apiserver only with its own hash, and only where it is seen to apply
      // it (an alpha field: another version might refuse it); the informer's own filter keeps the same
      // objects either way.
      const serverSide =
        hash === 'apiserver' &&
        (await apiserverFiltersShards(kc, config.namespaces[0]).catch((err: unknown) => {
          log.warn({ err: apiMessage(err) }, 'could not tell whether the apiserver filters shards; filtering here');
          return false;
        }));
      informer.serverSelector = serverSide;
      log.info(
        { serverSide, hash },
        serverSide
          ? 'the apiserver sends each replica only its shards (ShardedListAndWatch)'
          : `the apiserver does not filter shards (${hash === 'mixed' ? 'it cannot select on the mixed hash' : 'ShardedListAndWatch is off'}): each replica receives every object and keeps its shards'`,
      );
      const placement = new ShardPlacement(
        {
          startWorker: (k) => startQueueWorker(shardTaskQueue(base, k)),
          async reshard(owned) {
            await informer.reshard(owned);
            signaler.forget((ns) => !owned.includes(shardOf(ns, layout)));
          },
          // Every queue of the install, not only the shards held: a workflow keeps the queue it started
          // on until the sweep moves it, and after a change of layout that is not its namespace's
          // shard's. The informer says which models are its shards' ('unknown' for the rest).
          placed: () => void informer.listed().then(sweepWorkflows),
          failed: (err) => settle.reject(err),
        },
        log,
      );
      const leases = new ShardLeases(
        kc,
        {
          namespace: leaseNamespace,
          identity,
          layout,
          prefix: leasePrefixFor(base),
          contact: () => probes.contact(),
        },
        (owned) => placement.place(owned),
        log,
      );
      sources.shards = { leases, serverSide };
      parts.shards = () => leases.stop();
      leases.start();
      log.info({ shards, leaseNamespace, identity }, 'taking shards through Leases');
    }
    if (config.gateway.kind !== 'none') {
      // Idempotent across replicas: the one janitor keeps running, the others' starts are no-ops.
      const input: JanitorInput = { intervalSeconds: config.gatewaySweepSeconds };
      await untilTemporalAnswers(
        () =>
          client.workflow.start(janitorWorkflowType, {
            workflowId: janitorWorkflowId(config.temporal.taskQueue),
            taskQueue: config.temporal.taskQueue,
            args: [input],
            workflowIdConflictPolicy: 'USE_EXISTING',
            staticSummary: 'removes gateway routes whose MachineModel is gone',
          }),
        temporal,
        abort.signal,
      );
    }
  }

  const started = (async () => {
    if (config.metrics.port) {
      parts.endpoints = await serveEndpoints(registry, readyGate, config.metrics.port, config.metrics.host);
      log.info({ port: config.metrics.port }, 'serving /metrics, /healthz and /readyz');
    }
    await Promise.all([
      config.role !== 'informer' ? startWorker() : undefined,
      config.role !== 'worker' ? startInformer() : undefined,
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
