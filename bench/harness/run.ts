// One benchmark run on a stack: the floor (plain Deployments), the peer (sample-controller, Foos) and
// this operator (MachineModels, run compiled as its image runs it), one after another, each with N
// objects created by one kubectl apply in namespaces of their own (one, or --namespaces of them,
// the objects dealt round), then those namespaces deleted.
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { Client, Connection } from '@temporalio/client';
import { workflowIdFor } from '../../src/core/api.js';
import { sampleController } from '../../tools/local-stack/components.js';
import { ensureInstalled } from '../../tools/local-stack/install.js';
import { freePort } from '../../tools/local-stack/processes.js';
import { kubectlRun, resizeFakeNode, type StackInfo } from '../../tools/local-stack/stack.js';
import { machineModel } from '../../test/support/models.js';
import {
  installCrds,
  operatorMetric,
  operatorProbe,
  startOperatorProcess,
  type OperatorProcess,
} from '../../test/support/operator-process.js';
import { apiserverRequests, difference } from './apiserver-requests.js';
import { imageNodeOptions } from './image-node-options.js';
import { round, rssMiB, Usage } from './proc.js';
import { storyOf } from './slowest-story.js';
import { Timeline, type Watched } from './timeline.js';
import type { ShardHash } from '../../src/core/shards.js';

export const contenderNames = ['floor', 'peer', 'operator'] as const;
export type ContenderName = (typeof contenderNames)[number];

export interface ContenderResult {
  models: number;
  /** kubectl apply → every object converged (floor: Deployment available; peer: Foo status; operator: Ready). */
  convergedSeconds: number;
  /** Objects not converged when the run gave up on them (see RunOptions.giveUpSeconds); absent when all did. */
  notConverged?: number;
  /** How long the user's one `kubectl apply` of the N objects took, with the contender running. */
  applySeconds?: number;
  /**
   * The same apply into a namespace of its own before the controller started (peer and operator:
   * their custom resources, which nothing acts on then), so the slowdown compares within one run.
   */
  applyAloneSeconds?: number;
  /** kubectl apply → every Deployment exists. */
  allDeploymentsSeconds: number;
  /** How long after its Deployment became available each object reported it (not for the floor). */
  readyLagMs?: { p50: number; p99: number };
  cpuSeconds: Record<string, number>;
  machineCpuSeconds: number;
  peakRssMiB: Record<string, number>;
  apiserverRequests: Record<string, number>;
  /** The same by verb and resource, the largest first. */
  apiserverRequestsByResource: Record<string, number>;
  /** kubectl delete namespace → the namespace is gone; absent until measured (a run stopped during the deletion). */
  deleteSeconds?: number;
  /** kubectl delete namespace → the last of the contender's own objects (Foos, MachineModels) is gone. */
  ownObjectsGoneSeconds?: number;
  /** Whether the controller was stopped before the namespaces were deleted (RunOptions.deleteStopped). */
  deletedStopped?: boolean;
  /** The objects in the contender's namespaces as their deletion starts, by resource: what it must delete. */
  objectsAtDeletion?: Record<string, number>;
  /** CPU seconds per process and for the machine from `kubectl delete namespace` until they are gone. */
  deletionCpuSeconds?: Record<string, number>;
  /**
   * Operator only: kubectl delete namespace → no model's workflow runs any more, and the CPU seconds
   * from the end of the namespaces and of their objects until then (without a gateway the operator
   * tells deleted models' workflows after the namespaces' deletion: src/informer/deletion-lane.ts).
   */
  workflowsEndedSeconds?: number;
  workflowsEndCpuSeconds?: Record<string, number>;
  /**
   * Operator only, per model until it converged (median, max): history events, activities (regular
   * ones scheduled plus local ones recorded as markers) and workflow tasks (each one a trip through
   * Temporal's task queue).
   */
  perModel?: Record<'historyEvents' | 'activities' | 'localActivities' | 'workflowTasks', { p50: number; max: number }>;
  /** Operator only: the reconcile signals each model's workflows received until it converged. */
  signalsPerModel?: { p50: number; max: number };
  /** Operator only: replicas and namespaces of the run (cpuSeconds and peakRssMiB then have a key per replica). */
  replicas?: number;
  namespaces?: number;
  /** Operator only: the SDK's workflow cache once every model converged. */
  workflowCache?: WorkflowCache;
  /** Operator only: the model with the largest Ready lag, and its workflow's history timed from its Deployment's availability. */
  slowest?: { model: string; readyLagMs: number; story: string[] };
  /** After convergence, nothing changed for `restSeconds`: what that cost, per minute. */
  atRest?: AtRest;
}

export interface AtRest {
  seconds: number;
  cpuSecondsPerMinute: Record<string, number>;
  machineCpuSecondsPerMinute: number;
  apiserverRequestsPerMinute: number;
  /** The same by verb and resource, the largest first. */
  apiserverRequestsByResource: Record<string, number>;
  /** Operator only: events added to the models' histories, per minute, all models together. */
  historyEventsPerMinute?: number;
  /** Each process's resident set at the end of the rest. */
  rssMiB: Record<string, number>;
}

export interface RunOptions {
  /** Namespaces the N objects are dealt round (1: all in one). Shards split by namespace. */
  namespaces?: number;
  /** Operator replicas, as installed: with more than one, they split the namespaces (`shards`). */
  replicas?: number;
  /** The operator's --shards (0: none). */
  shards?: number;
  /** The operator's --shard-hash (its default: mixed). */
  shardHash?: ShardHash;
  /**
   * Stop the controller before deleting its namespaces: the deletion without it, to tell what paces
   * it (the controller's work, or the objects the namespace holds).
   */
  deleteStopped?: boolean;
  /** The operator writes a V8 CPU profile (.cpuprofile) here when it stops. */
  profileDir?: string;
  /** After convergence, leave everything alone this long and measure what it costs (0: no rest phase). */
  restSeconds?: number;
  /** How long to wait for convergence before recording how far the contender got and moving on. */
  giveUpSeconds?: number;
  /**
   * Called with the result once it is measured, before the namespace is deleted: at N=10,000 the
   * deletion took over half an hour, and a run cut short there should keep what it measured.
   */
  onMeasured?(result: ContenderResult): void;
}

interface Process {
  /** The contender's processes by name: `operator`, or `operator-0`, `operator-1`, … for replicas. */
  pids: Record<string, number>;
  stop(): Promise<void>;
  /** The workflow cache's counters from the SDK's own metrics (operator only). */
  workflowCache?(): Promise<WorkflowCache>;
}

/** The SDK's sticky workflow cache after converging: each miss replays a whole history. */
export type WorkflowCache = Record<'hits' | 'misses' | 'forcedEvictions' | 'size', number>;

/** Sums every series of each sticky-cache metric in the SDK's Prometheus text (counters may carry `_total`). */
export function workflowCacheOf(body: string): WorkflowCache {
  const sum = (name: string) =>
    body
      .split('\n')
      .filter((line) => new RegExp(`^temporal_${name}(_total)?[{ ]`).test(line))
      .reduce((total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  return {
    hits: sum('sticky_cache_hit'),
    misses: sum('sticky_cache_miss'),
    forcedEvictions: sum('sticky_cache_total_forced_eviction'),
    size: sum('sticky_cache_size'),
  };
}

interface Contender {
  /** n objects in the namespace, numbered from `first` (names are unique across a run's namespaces). */
  objects(namespace: string, n: number, first?: number): object[];
  own?: { watched: Watched; converged: (o: { status?: Record<string, any> }) => boolean };
  install?(stack: StackInfo): void;
  start?(stack: StackInfo, namespaces: string[], options: RunOptions, log: (line: string) => void): Promise<Process>;
}

const peerModuleDir = sampleController.moduleDir;

/** The peer's own example CRD (with the status subresource its controller writes), from its module. */
function peerCrdFile(): string {
  const info = JSON.parse(
    execFileSync('go', ['mod', 'download', '-json', `k8s.io/sample-controller@v${sampleController.version}`], {
      cwd: peerModuleDir,
      encoding: 'utf8',
    }),
  ) as { Dir: string };
  return path.join(info.Dir, 'artifacts/examples/crd-status-subresource.yaml');
}

const contenders: Record<ContenderName, Contender> = {
  floor: {
    objects: (namespace, n, first = 0) =>
      Array.from({ length: n }, (_, j) => first + j).map((i) => ({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: `d-${i}`, namespace },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: `d-${i}` } },
          template: {
            metadata: { labels: { app: `d-${i}` } },
            spec: { containers: [{ name: 'app', image: 'registry.example.com/models/classifier:v1' }] },
          },
        },
      })),
  },
  peer: {
    objects: (namespace, n, first = 0) =>
      Array.from({ length: n }, (_, j) => first + j).map((i) => ({
        apiVersion: 'samplecontroller.k8s.io/v1alpha1',
        kind: 'Foo',
        metadata: { name: `foo-${i}`, namespace },
        spec: { deploymentName: `foo-${i}`, replicas: 1 },
      })),
    own: {
      watched: {
        apiVersion: 'samplecontroller.k8s.io/v1alpha1',
        kind: 'Foo',
        prefix: '/apis/samplecontroller.k8s.io/v1alpha1',
        resource: 'foos',
      },
      converged: (foo) => (foo.status?.availableReplicas ?? 0) >= 1,
    },
    install(stack) {
      kubectlRun(stack, ['apply', '--server-side', '-f', peerCrdFile()]);
      kubectlRun(stack, ['wait', '--for=condition=Established', 'crd/foos.samplecontroller.k8s.io', '--timeout=30s']);
    },
    async start(stack, _namespaces, _options, log) {
      const bin = await ensureInstalled(sampleController, log);
      const logFile = path.join(stack.stateDir, 'logs', `sample-controller-${Date.now()}.log`);
      const child = spawn(bin, ['-kubeconfig', stack.kubeconfig], { stdio: ['ignore', 'pipe', 'pipe'] });
      const out = createWriteStream(logFile);
      child.stdout.pipe(out);
      child.stderr.pipe(out);
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      // Its informers list before its workers start; a few seconds is plenty on an empty cluster.
      await sleep(3_000);
      return {
        pids: { peer: child.pid! },
        async stop() {
          child.kill('SIGTERM');
          await exited;
        },
      };
    },
  },
  operator: {
    objects: (namespace, n, first = 0) =>
      Array.from({ length: n }, (_, j) => machineModel(namespace, `m-${first + j}`)),
    own: {
      watched: {
        apiVersion: 'stable.example.com/v1',
        kind: 'MachineModel',
        prefix: '/apis/stable.example.com/v1',
        resource: 'machinemodels',
      },
      converged: (mm) => mm.status?.phase === 'Ready',
    },
    install: installCrds,
    async start(stack, namespaces, options) {
      const replicas = options.replicas ?? 1;
      const shards = options.shards ?? 0;
      const taskQueue = `bench-${randomUUID()}`;
      const started: { process: OperatorProcess; metricsPort: number; sdkMetricsPort: number }[] = [];
      for (let r = 0; r < replicas; r++) {
        const metricsPort = await freePort();
        const sdkMetricsPort = await freePort();
        // Its own namespaces only, like the peer's and the floor's objects: a shared stack may hold other models.
        const process = startOperatorProcess(
          stack,
          {
            MMO_NAMESPACES: namespaces.join(','),
            MMO_TASK_QUEUE: taskQueue,
            MMO_METRICS_PORT: String(metricsPort),
            MMO_SDK_METRICS_PORT: String(sdkMetricsPort),
            MMO_SHARDS: String(shards),
            MMO_SHARD_HASH: options.shardHash ?? 'mixed',
            MMO_IDENTITY: `bench-${r}-${randomUUID().slice(0, 6)}`,
            LOG_LEVEL: 'warn',
            NODE_OPTIONS: [
              imageNodeOptions(),
              ...(options.profileDir ? [`--cpu-prof --cpu-prof-dir=${options.profileDir}`] : []),
            ].join(' '),
          },
          `bench-operator-${r}`,
        );
        started.push({ process, metricsPort, sdkMetricsPort });
      }
      for (const { metricsPort } of started)
        await until(
          'the operator ready',
          async () => (await operatorProbe(metricsPort, '/readyz')).status === 200,
          120_000,
        );
      // As installed, the replicas have split the shards before anyone applies models.
      if (shards)
        await until(
          'every shard held',
          async () => {
            const held = await Promise.all(
              started.map(({ metricsPort }) => operatorMetric(metricsPort, 'machinemodel_operator_shards_held')),
            );
            return held.reduce((a, b) => a + b, 0) === shards && held.every((h) => h > 0 || replicas > shards);
          },
          120_000,
        );
      return {
        pids: Object.fromEntries(
          started.map(({ process }, r) => [replicas === 1 ? 'operator' : `operator-${r}`, process.child.pid!]),
        ),
        async stop() {
          await Promise.all(started.map(({ process }) => process.stop()));
        },
        async workflowCache() {
          const caches = await Promise.all(
            started.map(async ({ sdkMetricsPort }) =>
              workflowCacheOf(await (await fetch(`http://127.0.0.1:${sdkMetricsPort}/metrics`)).text()),
            ),
          );
          const total = (key: keyof WorkflowCache) => caches.reduce((a, c) => a + c[key], 0);
          return {
            hits: total('hits'),
            misses: total('misses'),
            forcedEvictions: total('forcedEvictions'),
            size: total('size'),
          };
        },
      };
    },
  },
};

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (
    !(await Promise.resolve()
      .then(check)
      .catch(() => false))
  ) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000}s`);
    await sleep(200);
  }
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : NaN;
}

async function slowest(
  stack: StackInfo,
  namespaceOf: (model: string) => string,
  timeline: Timeline,
): Promise<ContenderResult['slowest']> {
  let worst: { model: string; readyLagMs: number; availableAt: number } | undefined;
  for (const [model, t] of timeline.converged) {
    const availableAt = timeline.available.get(model) ?? t;
    if (!worst || t - availableAt > worst.readyLagMs)
      worst = { model, readyLagMs: Math.round(t - availableAt), availableAt };
  }
  if (!worst) return undefined;
  const connection = await Connection.connect({ address: stack.temporalAddress });
  try {
    const client = new Client({ connection, namespace: stack.temporalNamespace });
    const zeroAt = timeline.epochMs + worst.availableAt;
    const story = await storyOf(client, workflowIdFor(namespaceOf(worst.model), worst.model), zeroAt);
    return { model: worst.model, readyLagMs: worst.readyLagMs, story };
  } finally {
    await connection.close();
  }
}

/** History events and activities per model workflow, from Temporal (all runs of each). */
async function perModel(
  stack: StackInfo,
  namespaces: string[],
): Promise<{ stats: ContenderResult['perModel']; signals: { p50: number; max: number }; historyEvents: number }> {
  const counts = await perModelCounts(stack, namespaces);
  const stats = (m: Map<string, number>) => ({ p50: quantile([...m.values()], 0.5), max: Math.max(...m.values()) });
  return {
    stats: {
      historyEvents: stats(counts.historyEvents),
      activities: stats(counts.activities),
      localActivities: stats(counts.localActivities),
      workflowTasks: stats(counts.workflowTasks),
    },
    signals: stats(counts.signals),
    historyEvents: sum(counts.historyEvents.values()),
  };
}

const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0);

async function perModelCounts(stack: StackInfo, namespaces: string[]) {
  const connection = await Connection.connect({ address: stack.temporalAddress });
  try {
    const client = new Client({ connection, namespace: stack.temporalNamespace });
    const counts = {
      historyEvents: new Map<string, number>(),
      activities: new Map<string, number>(),
      localActivities: new Map<string, number>(),
      workflowTasks: new Map<string, number>(),
      signals: new Map<string, number>(),
    };
    const quoted = namespaces.map((ns) => `'${ns}'`).join(', ');
    const add = (m: Map<string, number>, id: string, n: number) => m.set(id, (m.get(id) ?? 0) + n);
    for await (const wf of client.workflow.list({ query: `MachineModelNamespace IN (${quoted})` })) {
      // The history itself: visibility's historyLength stays 0 while a run is open.
      const events = (await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? [];
      const id = wf.workflowId;
      add(counts.historyEvents, id, events.length);
      add(counts.activities, id, events.filter((e) => e.activityTaskScheduledEventAttributes).length);
      add(
        counts.localActivities,
        id,
        events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').length,
      );
      add(counts.workflowTasks, id, events.filter((e) => e.workflowTaskStartedEventAttributes).length);
      add(counts.signals, id, events.filter((e) => e.workflowExecutionSignaledEventAttributes).length);
    }
    return counts;
  } finally {
    await connection.close();
  }
}

/** Every history event of the namespaces' model workflows (all runs), counted. */
async function historyEventsOf(stack: StackInfo, namespaces: string[]): Promise<number> {
  return sum((await perModelCounts(stack, namespaces)).historyEvents.values());
}

/** Leaves everything alone for `seconds` and measures what that costs, per minute. */
async function atRest(
  stack: StackInfo,
  pids: Record<string, number>,
  seconds: number,
  /** The operator's namespaces and their history events so far (counted for perModel already). */
  history: { namespaces: string[]; events: number } | undefined,
  log: (line: string) => void,
): Promise<AtRest> {
  log(`at rest for ${seconds}s`);
  const eventsBefore = history?.events;
  const requestsBefore = apiserverRequests(stack);
  const usage = new Usage(pids, ['postgres']);
  await sleep(seconds * 1000);
  const { cpuSeconds, machineCpuSeconds } = usage.stop();
  const requestsAfter = apiserverRequests(stack);
  const eventsAfter = history ? await historyEventsOf(stack, history.namespaces) : undefined;
  const perMinute = (x: number) => round((x * 60) / seconds, 2);
  const byResource = difference(requestsAfter.byResource, requestsBefore.byResource);
  return {
    seconds,
    cpuSecondsPerMinute: Object.fromEntries(Object.entries(cpuSeconds).map(([k, v]) => [k, perMinute(v)])),
    machineCpuSecondsPerMinute: perMinute(machineCpuSeconds),
    apiserverRequestsPerMinute: perMinute(Object.values(byResource).reduce((a, b) => a + b, 0)),
    apiserverRequestsByResource: Object.fromEntries(Object.entries(byResource).sort(([, a], [, b]) => b - a)),
    ...(eventsBefore !== undefined && eventsAfter !== undefined
      ? { historyEventsPerMinute: perMinute(eventsAfter - eventsBefore) }
      : {}),
    rssMiB: Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => {
        try {
          return [k, Math.round(rssMiB(pid))];
        } catch {
          return [k, NaN];
        }
      }),
    ),
  };
}

/**
 * The contender's objects applied with nothing acting on them, into a namespace that is deleted
 * (and gone) before the controller starts: the user's apply as it is without the controller.
 */
function applyAlone(stack: StackInfo, contender: Contender, n: number): number {
  const namespace = `bench-alone-${randomUUID().slice(0, 6)}`;
  kubectlRun(stack, ['create', 'namespace', namespace]);
  const seconds = timedApply(stack, contender, [namespace], n);
  kubectlRun(stack, ['delete', 'namespace', namespace, '--wait=true', '--timeout=30m']);
  return seconds;
}

/** The objects dealt round the namespaces: object i goes to namespace i mod K. */
function dealt(contender: Contender, namespaces: string[], n: number): object[] {
  const k = namespaces.length;
  return namespaces.flatMap((ns, j) => {
    const count = Math.floor(n / k) + (j < n % k ? 1 : 0);
    const first = j * Math.floor(n / k) + Math.min(j, n % k);
    return contender.objects(ns, count, first);
  });
}

/** The user's one `kubectl apply` of the contender's N objects into the namespaces, in seconds. */
function timedApply(stack: StackInfo, contender: Contender, namespaces: string[], n: number): number {
  const applying = performance.now();
  kubectlRun(
    stack,
    ['apply', '--server-side', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: dealt(contender, namespaces, n) }),
  );
  return round((performance.now() - applying) / 1000);
}

export async function runContender(
  stack: StackInfo,
  name: ContenderName,
  n: number,
  log: (line: string) => void,
  options: RunOptions = {},
): Promise<ContenderResult> {
  const timeoutMs = (options.giveUpSeconds ?? 3600) * 1000;
  const contender = contenders[name];
  contender.install?.(stack);
  const id = randomUUID().slice(0, 6);
  const k = options.namespaces ?? 1;
  const namespaces = Array.from({ length: k }, (_, j) => `bench-${name}-${id}${k > 1 ? `-${j}` : ''}`);
  const namespaceOf = (model: string) => namespaces[Number(model.slice(model.lastIndexOf('-') + 1)) % k]!;
  const applyAloneSeconds = contender.start ? applyAlone(stack, contender, n) : undefined;
  for (const ns of namespaces) kubectlRun(stack, ['create', 'namespace', ns]);
  const process = await contender.start?.(stack, namespaces, options, log);
  const pidOf = (component: string) => stack.processes.find((p) => p.name === component)?.pid;
  const pids = Object.fromEntries(
    Object.entries({
      ...(process?.pids ?? {}),
      'kube-apiserver': pidOf('kube-apiserver'),
      etcd: pidOf('etcd'),
      temporal: pidOf('temporal'),
      // The production-shaped Temporal's database (a process per connection: counted as a tree).
      postgres: pidOf('postgres'),
    }).filter((e): e is [string, number] => e[1] !== undefined),
  );
  const usage = new Usage(pids, ['postgres']);
  const requestsBefore = apiserverRequests(stack);
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  const timeline = new Timeline(kc, namespaces, contender.own);
  await timeline.start();
  timeline.begin();
  const applySeconds = timedApply(stack, contender, namespaces, n);
  log(`${name}: ${n} objects applied in ${namespaces.join(', ')}`);
  // A contender that cannot keep up is a result too: how far it got, and the run goes on to the next.
  const gaveUp = await until(`${name}: ${n} converged`, () => timeline.done.size >= n, timeoutMs).then(
    () => false,
    (err: Error) => (log(err.message), true),
  );
  // Taken now: objects that go on converging during the measurements below are not this run's.
  const convergedSeconds = round(Math.max(...timeline.done.values()) / 1000);
  const notConverged = n - timeline.done.size;
  const allDeploymentsSeconds = round(Math.max(...timeline.created.values()) / 1000);
  const { cpuSeconds, machineCpuSeconds, peakRssMiB } = usage.stop();
  const requestsAfter = apiserverRequests(stack);
  const workflowCache = await process?.workflowCache?.();
  const lags = contender.own
    ? // Each object's Deployment has the object's name (Foo deploymentName, MachineModel).
      [...timeline.converged].map(([obj, t]) => t - (timeline.available.get(obj) ?? t))
    : [];
  const counted = name === 'operator' ? await perModel(stack, namespaces) : undefined;
  const result: ContenderResult = {
    models: n,
    convergedSeconds,
    ...(gaveUp ? { notConverged } : {}),
    applySeconds,
    ...(applyAloneSeconds !== undefined ? { applyAloneSeconds } : {}),
    allDeploymentsSeconds,
    ...(lags.length
      ? { readyLagMs: { p50: Math.round(quantile(lags, 0.5)), p99: Math.round(quantile(lags, 0.99)) } }
      : {}),
    cpuSeconds,
    machineCpuSeconds,
    peakRssMiB,
    apiserverRequests: difference(requestsAfter.byVerb, requestsBefore.byVerb),
    apiserverRequestsByResource: Object.fromEntries(
      Object.entries(difference(requestsAfter.byResource, requestsBefore.byResource)).sort(([, a], [, b]) => b - a),
    ),
    ...(counted ? { perModel: counted.stats, signalsPerModel: counted.signals } : {}),
    ...(name === 'operator' ? { replicas: options.replicas ?? 1, namespaces: k } : {}),
    ...(workflowCache ? { workflowCache } : {}),
  };
  if (name === 'operator' && lags.length) result.slowest = await slowest(stack, namespaceOf, timeline);
  if (options.restSeconds)
    result.atRest = await atRest(
      stack,
      pids,
      options.restSeconds,
      counted && { namespaces, events: counted.historyEvents },
      log,
    );
  result.objectsAtDeletion = objectsIn(stack, namespaces);
  options.onMeasured?.(result);
  if (options.deleteStopped) {
    await process?.stop();
    result.deletedStopped = true;
  }
  log(`${name}: converged in ${result.convergedSeconds}s; deleting ${namespaces.join(', ')}`);
  const stillRunning = Object.fromEntries(
    Object.entries(pids).filter(([component]) => !(options.deleteStopped && process?.pids[component])),
  );
  const deletionUsage = new Usage(stillRunning, ['postgres']);
  const deleting = performance.now();
  kubectlRun(stack, ['delete', 'namespace', ...namespaces, '--wait=false']);
  const since = () => round((performance.now() - deleting) / 1000);
  await until(
    `${name}: namespaces ${namespaces.join(', ')} gone`,
    () => {
      const left = new Set(kubectlRun(stack, ['get', 'namespace', '-o', 'name']).split('\n'));
      return namespaces.every((ns) => !left.has(`namespace/${ns}`));
    },
    timeoutMs,
  );
  const deleteSeconds = since();
  result.deleteSeconds = deleteSeconds;
  const deletionUsed = deletionUsage.stop();
  result.deletionCpuSeconds = { ...deletionUsed.cpuSeconds, machine: deletionUsed.machineCpuSeconds };
  if (contender.own) {
    // Finalizers hold a namespace: when did the controller let go of the last of its objects? The watch
    // may deliver the last deletions after kubectl already sees the namespace gone; they were gone by then.
    await until(`${name}: the watch sees its objects gone`, () => timeline.ownGoneAt !== undefined, 60_000);
    result.ownObjectsGoneSeconds = Math.min(round((timeline.ownGoneAt! - deleting) / 1000), deleteSeconds);
  }
  if (name === 'operator' && !options.deleteStopped) {
    const tail = new Usage(stillRunning, ['postgres']);
    await untilNoneRunning(stack, namespaces, timeoutMs);
    result.workflowsEndedSeconds = since();
    const used = tail.stop();
    result.workflowsEndCpuSeconds = { ...used.cpuSeconds, machine: used.machineCpuSeconds };
  }
  await timeline.stop();
  if (!options.deleteStopped) await process?.stop();
  return result;
}

/**
 * Until no model workflow of these namespaces runs, by Temporal's visibility, twice in a row a second
 * apart (a run that continues as new is briefly in neither state).
 */
async function untilNoneRunning(stack: StackInfo, namespaces: string[], timeoutMs: number): Promise<void> {
  const connection = await Connection.connect({ address: stack.temporalAddress });
  try {
    const client = new Client({ connection, namespace: stack.temporalNamespace });
    const quoted = namespaces.map((ns) => `'${ns}'`).join(', ');
    const query = `MachineModelNamespace IN (${quoted}) AND ExecutionStatus = 'Running'`;
    let empty = 0;
    const twiceEmpty = async () => {
      await sleep(1000);
      empty = (await client.workflow.count(query)).count === 0 ? empty + 1 : 0;
      return empty >= 2;
    };
    await until('model workflows ended', twiceEmpty, timeoutMs);
  } finally {
    await connection.close();
  }
}

/** Every object in the namespaces, counted by resource (`deployments.apps`, `events`, …). */
function objectsIn(stack: StackInfo, namespaces: string[]): Record<string, number> {
  const resources = kubectlRun(stack, ['api-resources', '--verbs=list', '--namespaced', '-o', 'name'])
    .split('\n')
    .filter(Boolean)
    // Events appear twice (core and events.k8s.io): counted once.
    .filter((r) => r !== 'events.events.k8s.io');
  const counts: Record<string, number> = {};
  for (const ns of namespaces)
    for (const line of kubectlRun(stack, ['get', resources.join(','), '-n', ns, '-o', 'name']).split('\n')) {
      const resource = line.slice(0, line.indexOf('/'));
      if (resource) counts[resource] = (counts[resource] ?? 0) + 1;
    }
  return Object.fromEntries(Object.entries(counts).sort(([, a], [, b]) => b - a));
}

/** Room on the fake node for the largest run (each object has one pod). */
export function makeRoom(stack: StackInfo, n: number): void {
  resizeFakeNode(stack, Math.max(500, n + 100));
}
