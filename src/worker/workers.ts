// The Temporal workers of this process, on one connection with one set of activities: the base
// queue's, which runs everywhere (the janitor, models started before sharding or by mmctl), and one
// per shard held or queue drained (src/sharding/), started and stopped as those change.
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import { WorkerStop } from '../../activities/cancellation.js';
import { createActivities } from '../../activities/index.js';
import type { KubeClient } from '../../activities/kube-client.js';
import type { OperatorConfig } from '../process/config.js';
import { cachedWorkflowsFor, heapLimitMiB } from '../process/heap-bound.js';
import type { ReconcileMetrics } from '../process/reconcile-metrics.js';
import type { Reachability } from '../process/ready-gate.js';
import { untilTemporalAnswers, workerConnector } from '../process/temporal.js';
import type { ShardWorker } from '../sharding/shard-placement.js';
import { gatewayDriver } from './gateway-driver.js';
import { redirectStickyRuns } from './sticky-redirect.js';
import { workflowSource } from './workflow-source.js';

/** A drain's workflow cache (src/sharding/queue-drains.ts): its workflows only pass through. */
const drainCachedWorkflows = 16;

interface Shutdown {
  shutdownGraceTime: string;
  shutdownForceTime?: string;
  maxCachedWorkflows?: number;
}

export interface WorkerSettings {
  config: OperatorConfig;
  kube: KubeClient;
  /** The URL of the entry module: the workflow code is found from it (workflow-source.ts). */
  entry: string;
  metrics: ReconcileMetrics;
  /** Told whether Temporal answers while a connection or a worker is waited for. */
  temporal: Reachability;
  /** Aborted when the operator stops: no worker is waited for any more. */
  signal: AbortSignal;
  log: Logger;
}

export class Workers {
  private activities: object | undefined;
  private connected!: (connection: NativeConnection) => void;
  /** The base worker's connection, which the shards' and drains' workers share. */
  private readonly connection = new Promise<NativeConnection>((resolve) => (this.connected = resolve));

  private baseRedirected!: () => void;
  /** Settles once the base queue's running workflows take their tasks from it (or that failed). */
  readonly redirected = new Promise<void>((resolve) => (this.baseRedirected = resolve));

  constructor(private readonly settings: WorkerSettings) {}

  /** Makes the activities, then connects to Temporal, waiting while it does not answer. */
  connect(): Promise<NativeConnection> {
    const { config, kube, temporal, signal } = this.settings;
    this.activities = createActivities({ kube, build: config.build, gateway: gatewayDriver(config.gateway, kube) });
    return untilTemporalAnswers(workerConnector(config.temporal), temporal, signal);
  }

  /**
   * The base queue's worker, on the connection `connect` made, which the other workers then share.
   * No stop of its own: the process ends with this worker, and its activities get the grace time.
   */
  async startBase(connection: NativeConnection): Promise<Worker> {
    const { config, temporal, signal } = this.settings;
    void this.redirect(connection, config.temporal.taskQueue).then(this.baseRedirected);
    const worker = await untilTemporalAnswers(
      () => this.create(connection, config.temporal.taskQueue, undefined),
      temporal,
      signal,
    );
    this.connected(connection);
    return worker;
  }

  /**
   * A shard's worker, or a queue drain's. It gives up after 30 s (Temporal away): the next placement
   * tries again. It stops within 6 s of being asked (src/core/shard-assignment.ts counts on it):
   * in-flight tasks get 4 s, then are cancelled.
   */
  async startQueue(queue: string, drain = false): Promise<ShardWorker> {
    const giveUp = AbortSignal.any([this.settings.signal, AbortSignal.timeout(30_000)]);
    const connection = await this.connectionWithin(giveUp);
    const stop = new WorkerStop();
    if (!drain) void this.redirect(connection, queue);
    const worker = await this.createWithin(giveUp, connection, queue, stop, {
      shutdownGraceTime: '4 seconds',
      shutdownForceTime: '6 seconds',
      // A drain's workflows pass through to move: a small cache bounds what each drain holds.
      ...(drain ? { maxCachedWorkflows: drainCachedWorkflows } : {}),
    });
    // A worker that fails on its own stops its activities too.
    const run = worker.run().finally(() => stop.stop());
    return {
      run,
      shutdown: async () => {
        // Its activities end now, local ones too (the worker cancels neither in time): the shard's next
        // owner may write as soon as this worker is down.
        stop.stop();
        if (worker.getState() === 'RUNNING') worker.shutdown();
        // Forced down (shutdownForceTime): an activity ignored its cancellation and may still run.
        await run.catch((err: unknown) =>
          this.settings.log.error({ err, taskQueue: queue }, 'a worker was forced down'),
        );
      },
    };
  }

  /** In the background: the queue's running workflows' next tasks come here, not to a dead worker's sticky queue. */
  private redirect(connection: NativeConnection, taskQueue: string): Promise<void> {
    const { config, log } = this.settings;
    return redirectStickyRuns(connection, config.temporal.namespace, taskQueue, log).then(
      (runs) => {
        if (runs > 0) log.info({ taskQueue, runs }, "the queue's running workflows take their next tasks from it");
      },
      (err: unknown) =>
        log.warn({ err, taskQueue }, "could not reset the running workflows' sticky queues: they wait out its timeout"),
    );
  }

  private async connectionWithin(giveUp: AbortSignal): Promise<NativeConnection> {
    giveUp.throwIfAborted();
    let onAbort: (() => void) | undefined;
    return Promise.race([
      this.connection,
      new Promise<never>((_, reject) => {
        onAbort = () => reject(new Error('no worker connection to Temporal within 30 s'));
        giveUp.addEventListener('abort', onAbort, { once: true });
      }),
    ]).finally(() => giveUp.removeEventListener('abort', onAbort!));
  }

  private async createWithin(
    giveUp: AbortSignal,
    connection: NativeConnection,
    queue: string,
    stop: WorkerStop,
    shutdown: Shutdown,
  ): Promise<Worker> {
    let created: Worker | undefined;
    return untilTemporalAnswers(
      async () => (created = await this.create(connection, queue, stop, shutdown)),
      this.settings.temporal,
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
  }

  private create(
    connection: NativeConnection,
    taskQueue: string,
    stop: WorkerStop | undefined,
    shutdown: Shutdown = { shutdownGraceTime: '10 seconds' },
  ): Promise<Worker> {
    const { config, entry, metrics } = this.settings;
    return Worker.create({
      connection,
      namespace: config.temporal.namespace,
      taskQueue,
      ...workflowSource(entry),
      activities: this.activities!,
      interceptors: { activity: [metrics.activityInterceptor(), ...(stop ? [stop.interceptor] : [])] },
      sinks: metrics.sinks(),
      maxConcurrentActivityTaskExecutions: config.maxConcurrentActivities,
      maxConcurrentWorkflowTaskExecutions: config.maxConcurrentWorkflowTasks,
      maxConcurrentLocalActivityExecutions: config.maxConcurrentLocalActivities,
      maxCachedWorkflows: config.maxCachedWorkflows ?? cachedWorkflowsFor(heapLimitMiB(), config.maxStartingModels),
      stickyQueueScheduleToStartTimeout: `${config.stickyQueueTimeoutSeconds} seconds`,
      ...shutdown,
    });
  }
}
