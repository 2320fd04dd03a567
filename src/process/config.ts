// Operator configuration: flags, with environment variables as defaults (12-factor), validated up front
// so that a bad value is one clear line, not a failure deep inside a client.
import { Command, InvalidArgumentError, Option } from 'commander';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { defaultBuildOptions, type BuildOptions } from '../core/desired-state.js';
import { defaultWorkflowConfig, type WorkflowConfig } from '../core/reconcile-timing.js';
import { startGateDefaults } from '../core/first-round.js';
import { maxShards, shardHashes, type ShardHash } from '../core/shards.js';

/**
 * The readiness rechecks of the workflows this operator starts (in their input, so runs already going
 * keep theirs): a safety net only. The watch wakes a model on every change of its rollout, its
 * autoscaler and its Pods' scheduling; at N=1000 rechecks every 10 s or more often were rounds that
 * found nothing new while the cluster took minutes to make Deployments available.
 */
const readinessRecheckSeconds = 60;
const readinessRecheckMaxSeconds = 300;

export interface TemporalConfig {
  address: string;
  namespace: string;
  taskQueue: string;
  tls?: { serverName?: string; caFile?: string; certFile?: string; keyFile?: string };
  /** From TEMPORAL_API_KEY only, never a flag (flags show in process lists); never logged. */
  apiKey?: string;
}

export type GatewayConfig =
  | { kind: 'none' }
  | {
      kind: 'caddy';
      adminURL: string;
      server: string;
      listen: string;
      publicURL: string;
      upstream: 'service-dns' | 'cluster-ip';
    }
  | { kind: 'gateway-api'; parent: { namespace: string; name: string; sectionName?: string }; publicURL: string };

export interface OperatorConfig {
  kubeconfig?: string;
  temporal: TemporalConfig;
  namespaces: string[];
  role: 'all' | 'worker' | 'informer';
  maxConcurrentActivities: number;
  maxConcurrentWorkflowTasks: number;
  /** Local activities in flight at once: each is one round step's Kubernetes requests. */
  maxConcurrentLocalActivities: number;
  /** Unset: the SDK's default, from the heap limit. */
  maxCachedWorkflows?: number;
  /** New models whose workflows may be starting at once (the informer's start gate); 0: no bound. */
  maxStartingModels: number;
  /**
   * Replicas split the namespaces in this many shards, taken through Leases in `leaseNamespace`
   * (docs/scaling.md), drawn from the namespace's name by `hash`; 0: every replica watches everything
   * and polls the one task queue.
   */
  sharding: { shards: number; hash: ShardHash; leaseNamespace: string; identity: string };
  /** How long a workflow task may wait on this worker's sticky queue before it moves to the normal one. */
  stickyQueueTimeoutSeconds: number;
  build: BuildOptions;
  workflow: Partial<WorkflowConfig>;
  gateway: GatewayConfig;
  /** How often the gateway janitor compares the gateway's routes with the models. */
  gatewaySweepSeconds: number;
  /** The apiserver ends each watch after this; a watch silent well past it is presumed dead. */
  watchTimeoutSeconds: number;
  /** Port for /metrics and /healthz; 0 turns them off. sdkPort: the Temporal SDK's own metrics (0: off). */
  metrics: { port: number; host: string; sdkPort: number };
  logLevel: string;
}

interface GatewayFlags {
  gateway: 'none' | 'caddy' | 'gateway-api';
  caddyAdmin: string;
  caddyServer: string;
  caddyListen: string;
  caddyUpstream: 'service-dns' | 'cluster-ip';
  gatewayParent?: string;
  gatewayPublicUrl?: string;
}

export function gatewayConfigFrom(f: GatewayFlags): GatewayConfig {
  if (f.gateway === 'caddy') {
    // Each replica is named by its scheme, host and port in traffic samples and messages (never by its
    // credentials or path): so each URL must be http(s) and name a replica of its own. The messages do
    // not repeat the value, which may hold credentials and reaches the log.
    const origins = f.caddyAdmin.split(',').map((one) => (URL.canParse(one.trim()) ? new URL(one.trim()) : undefined));
    if (origins.some((u) => u?.protocol !== 'http:' && u?.protocol !== 'https:'))
      throw new InvalidArgumentError('--caddy-admin must be http(s) URLs separated by commas');
    if (new Set(origins.map((u) => u!.origin)).size !== origins.length)
      throw new InvalidArgumentError('--caddy-admin: each URL must have a scheme, host and port of its own');
    const host = f.caddyListen.startsWith(':') ? `localhost${f.caddyListen}` : f.caddyListen;
    return {
      kind: 'caddy',
      adminURL: f.caddyAdmin.replace(/\/+$/, ''),
      server: f.caddyServer,
      listen: f.caddyListen,
      publicURL: f.gatewayPublicUrl ?? `http://${host}`,
      upstream: f.caddyUpstream,
    };
  }
  if (f.gateway === 'gateway-api') {
    const m = /^([a-z0-9-]+)\/([a-z0-9.-]+)(?:\/([a-z0-9-]+))?$/.exec(f.gatewayParent ?? '');
    if (!m)
      throw new InvalidArgumentError(
        `--gateway gateway-api needs --gateway-parent <namespace>/<name>[/<listener>], got "${f.gatewayParent ?? ''}"`,
      );
    const parent = { namespace: m[1]!, name: m[2]!, ...(m[3] ? { sectionName: m[3] } : {}) };
    return {
      kind: 'gateway-api',
      parent,
      publicURL: f.gatewayPublicUrl ?? `http://${parent.name}.${parent.namespace}.svc`,
    };
  }
  return { kind: 'none' };
}

function port(name: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0 || n > 65535)
      throw new InvalidArgumentError(`${name} must be a port number (0-65535), got "${value}"`);
    return n;
  };
}

/** A commander argument parser for a whole number of at least `min`. */
export function wholeNumber(name: string, min = 1) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min)
      throw new InvalidArgumentError(`${name} must be a whole number >= ${min}, got "${value}"`);
    return n;
  };
}

export function temporalOptions(cmd: Command): Command {
  return cmd
    .addOption(
      new Option('--temporal-address <host:port>', 'Temporal frontend')
        .env('TEMPORAL_ADDRESS')
        .default('127.0.0.1:7233'),
    )
    .addOption(
      new Option('--temporal-namespace <ns>', 'Temporal namespace').env('TEMPORAL_NAMESPACE').default('default'),
    )
    .addOption(
      new Option('--task-queue <name>', 'task queue of the operator')
        .env('MMO_TASK_QUEUE')
        .default('machinemodel-operator'),
    )
    .addOption(
      new Option('--temporal-tls', 'connect to Temporal with TLS (implied by a client cert or API key)').env(
        'TEMPORAL_TLS',
      ),
    )
    .addOption(
      new Option('--temporal-tls-server-name <name>', 'TLS server name override').env('TEMPORAL_TLS_SERVER_NAME'),
    )
    .addOption(
      new Option('--temporal-tls-ca <file>', 'CA certificate for the Temporal server').env(
        'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
      ),
    )
    .addOption(
      new Option('--temporal-tls-cert <file>', 'client certificate (mTLS)').env('TEMPORAL_TLS_CLIENT_CERT_PATH'),
    )
    .addOption(new Option('--temporal-tls-key <file>', 'client key (mTLS)').env('TEMPORAL_TLS_CLIENT_KEY_PATH'));
}

interface TemporalFlags {
  temporalAddress: string;
  temporalNamespace: string;
  taskQueue: string;
  temporalTls?: boolean | string;
  temporalTlsServerName?: string;
  temporalTlsCa?: string;
  temporalTlsCert?: string;
  temporalTlsKey?: string;
}

export function temporalConfigFrom(flags: TemporalFlags, env: NodeJS.ProcessEnv = process.env): TemporalConfig {
  const apiKey = env.TEMPORAL_API_KEY || undefined;
  const wantsTls = flags.temporalTls === true || flags.temporalTls === 'true' || !!flags.temporalTlsCert || !!apiKey;
  if (!!flags.temporalTlsCert !== !!flags.temporalTlsKey) {
    throw new InvalidArgumentError('--temporal-tls-cert and --temporal-tls-key go together');
  }
  return {
    address: flags.temporalAddress,
    namespace: flags.temporalNamespace,
    taskQueue: flags.taskQueue,
    apiKey,
    tls: wantsTls
      ? {
          serverName: flags.temporalTlsServerName,
          caFile: flags.temporalTlsCa,
          certFile: flags.temporalTlsCert,
          keyFile: flags.temporalTlsKey,
        }
      : undefined,
  };
}

function operatorCommand(): Command {
  return temporalOptions(new Command('machinemodel-operator'))
    .description(
      'Kubernetes operator for MachineModel resources; each resource is reconciled by a durable Temporal workflow',
    )
    .addOption(
      new Option('--kubeconfig <file>', 'kubeconfig (default: in-cluster, then ~/.kube/config)').env('KUBECONFIG'),
    )
    .addOption(
      new Option('--namespaces <list>', 'comma-separated namespaces to watch (default: all)')
        .env('MMO_NAMESPACES')
        .default(''),
    )
    .addOption(
      new Option('--role <role>', 'run the informer, the worker, or both')
        .choices(['all', 'worker', 'informer'])
        .env('MMO_ROLE')
        .default('all'),
    )
    .addOption(
      new Option('--max-concurrent-activities <n>', 'activity slots')
        .env('MMO_MAX_CONCURRENT_ACTIVITIES')
        .argParser(wholeNumber('--max-concurrent-activities'))
        .default(32),
    )
    .addOption(
      new Option('--max-concurrent-workflow-tasks <n>', 'workflow task slots')
        .env('MMO_MAX_CONCURRENT_WORKFLOW_TASKS')
        .argParser(wholeNumber('--max-concurrent-workflow-tasks'))
        .default(32),
    )
    .addOption(
      new Option(
        '--max-concurrent-local-activities <n>',
        "round steps (each a few Kubernetes requests) in flight at once: the operator's share of the apiserver",
      )
        .env('MMO_MAX_CONCURRENT_LOCAL_ACTIVITIES')
        .argParser(wholeNumber('--max-concurrent-local-activities'))
        // The SDK's 100 drove kube-apiserver's Service creation into handler timeouts in an N=10,000
        // attempt (its numbers were not kept; bench/journal.md, "N=10,000 (2026-11-25)", ran with 16).
        .default(16),
    )
    .addOption(
      new Option(
        '--max-cached-workflows <n>',
        'workflows kept in memory between their tasks (about 0.2 MiB each; one not kept replays its history on ' +
          "its next task); default: the SDK's size for the heap limit (--max-old-space-size), or twice " +
          '--max-starting-models and 16 more when that is larger',
      )
        .env('MMO_MAX_CACHED_WORKFLOWS')
        .argParser(wholeNumber('--max-cached-workflows')),
    )
    .addOption(
      new Option(
        '--max-starting-models <n>',
        'new models whose workflows start at once; the others wait their turn until one is Ready or stalled ' +
          `(or ${startGateDefaults.holdLimitMs / 1000} s have passed), so a large apply neither floods the worker nor crowds out the apiserver; ` +
          `${startGateDefaults.burst.maxStarting} while more than ${startGateDefaults.burst.arrivals} new models arrive within ${startGateDefaults.burst.windowMs / 1000} s; 0: no bound`,
      )
        .env('MMO_MAX_STARTING_MODELS')
        .argParser(wholeNumber('--max-starting-models', 0))
        .default(startGateDefaults.maxStarting),
    )
    .addOption(
      new Option(
        '--shards <n>',
        "split the namespaces in n shards, which the replicas take through Leases: each lists, watches and runs the workflows of its shards' namespaces only (docs/scaling.md); 0: every replica does everything",
      )
        .env('MMO_SHARDS')
        .argParser(wholeNumber('--shards', 0))
        .default(0),
    )
    .addOption(
      new Option(
        '--shard-hash <hash>',
        "how a namespace's shard is drawn from its name: mixed spreads names alike (team-1, team-2) evenly, and each replica filters what it receives; apiserver is the apiserver's own hash, which it can filter on (ShardedListAndWatch) but which puts names that differ only at the end on one shard (docs/scaling.md)",
      )
        .env('MMO_SHARD_HASH')
        .choices(shardHashes)
        .default('mixed'),
    )
    .addOption(
      new Option('--lease-namespace <namespace>', "where the shards' Leases live: the operator's own namespace")
        .env('MMO_LEASE_NAMESPACE')
        .default(inClusterNamespace() ?? 'machinemodel-system'),
    )
    .addOption(
      new Option(
        '--identity <name>',
        "this replica's name in the shards' Leases (default: its host name and a random suffix)",
      )
        .env('MMO_IDENTITY')
        .default(`${hostname()}-${randomBytes(3).toString('hex')}`),
    )
    .addOption(
      new Option(
        '--sticky-queue-timeout <seconds>',
        "how long a workflow task waits on this worker's sticky queue before it moves to the normal queue, " +
          "which the SDK serves with one poller while the sticky queue has a backlog; also how long a dead worker's " +
          'sticky tasks wait',
      )
        .env('MMO_STICKY_QUEUE_TIMEOUT_SECONDS')
        .argParser(wholeNumber('--sticky-queue-timeout'))
        .default(10),
    )
    .addOption(
      new Option('--gpu-resource-name <name>', 'extended resource requested for GPUs')
        .env('MMO_GPU_RESOURCE_NAME')
        .default(defaultBuildOptions.gpuResourceName),
    )
    .addOption(
      new Option('--cluster-domain <domain>', 'cluster DNS domain used in inference URLs')
        .env('MMO_CLUSTER_DOMAIN')
        .default(defaultBuildOptions.clusterDomain),
    )
    .addOption(
      new Option('--progress-deadline <seconds>', 'not Ready this long -> Failed (ProgressDeadlineExceeded)')
        .env('MMO_PROGRESS_DEADLINE_SECONDS')
        .argParser(wholeNumber('--progress-deadline'))
        .default(defaultWorkflowConfig.progressDeadlineSeconds),
    )
    .addOption(
      new Option(
        '--readiness-recheck <seconds>',
        `first wait before a progressing model is looked at again without any event (doubling up to ${readinessRecheckMaxSeconds} s); ` +
          "the watch wakes it on every change of its Deployment's rollout and of its Pods' scheduling, so this is a safety net",
      )
        .env('MMO_READINESS_RECHECK_SECONDS')
        .argParser(wholeNumber('--readiness-recheck'))
        .default(readinessRecheckSeconds),
    )
    .addOption(
      new Option('--drift-check <seconds>', 'how often an idle model is checked without any event')
        .env('MMO_DRIFT_CHECK_SECONDS')
        .argParser(wholeNumber('--drift-check'))
        .default(defaultWorkflowConfig.driftCheckSeconds),
    )
    .addOption(
      new Option('--gateway <kind>', 'API gateway models are published on')
        .choices(['none', 'caddy', 'gateway-api'])
        .env('MMO_GATEWAY')
        .default('none'),
    )
    .addOption(
      new Option(
        '--caddy-admin <url>',
        'Caddy admin API; a name that resolves to several replicas (a headless Service), or URLs separated by commas, reaches each',
      )
        .env('MMO_CADDY_ADMIN')
        .default('http://127.0.0.1:2019'),
    )
    .addOption(
      new Option('--caddy-server <name>', 'Caddy HTTP server that carries model routes')
        .env('MMO_CADDY_SERVER')
        .default('machinemodels'),
    )
    .addOption(
      new Option('--caddy-listen <address>', 'listen address of that server, if the operator creates it')
        .env('MMO_CADDY_LISTEN')
        .default(':8080'),
    )
    .addOption(
      new Option('--caddy-upstream <how>', "how Caddy reaches a model: its Service's DNS name or cluster IP")
        .choices(['service-dns', 'cluster-ip'])
        .env('MMO_CADDY_UPSTREAM')
        .default('service-dns'),
    )
    .addOption(
      new Option('--gateway-parent <ns/name>', 'parent Gateway of the HTTPRoutes (gateway-api)').env(
        'MMO_GATEWAY_PARENT',
      ),
    )
    .addOption(
      new Option('--gateway-public-url <url>', 'base URL clients use to reach the gateway').env(
        'MMO_GATEWAY_PUBLIC_URL',
      ),
    )
    .addOption(
      new Option(
        '--gateway-sweep <seconds>',
        'how often routes without a model are removed and missing routes republished',
      )
        .env('MMO_GATEWAY_SWEEP_SECONDS')
        .argParser(wholeNumber('--gateway-sweep'))
        .default(60),
    )
    .addOption(
      new Option(
        '--watch-timeout <seconds>',
        'the apiserver ends each watch after this; silence well past it restarts the watch',
      )
        .env('MMO_WATCH_TIMEOUT_SECONDS')
        .argParser(wholeNumber('--watch-timeout'))
        .default(300),
    )
    .addOption(
      new Option('--metrics-port <port>', 'port for /metrics and /healthz (0: off)')
        .env('MMO_METRICS_PORT')
        .argParser(port('--metrics-port'))
        .default(0),
    )
    .addOption(
      new Option(
        '--sdk-metrics-port <port>',
        "port for the Temporal SDK's worker metrics in Prometheus format (task slots, schedule-to-start latency, sticky cache; 0: off)",
      )
        .env('MMO_SDK_METRICS_PORT')
        .argParser(port('--sdk-metrics-port'))
        .default(0),
    )
    .addOption(
      new Option('--metrics-host <address>', 'address /metrics (and the SDK metrics) listen on')
        .env('MMO_METRICS_HOST')
        .default('127.0.0.1'),
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['trace', 'debug', 'info', 'warn', 'error'])
        .env('LOG_LEVEL')
        .default('info'),
    )
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
}

/** The namespace of the ServiceAccount the operator runs as, when it runs in a Pod. */
function inClusterNamespace(): string | undefined {
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Every environment variable the operator reads: a manifest that sets any other has a typo. */
export function operatorEnvironment(): string[] {
  const fromOptions = operatorCommand().options.flatMap((o) => (o.envVar ? [o.envVar] : []));
  // NODE_OPTIONS is Node's own: the Deployment sizes the heaps with it.
  return [...fromOptions, 'TEMPORAL_API_KEY', 'NODE_OPTIONS'];
}

export function parseOperatorConfig(argv: string[]): OperatorConfig {
  const cmd = operatorCommand();
  cmd.parse(argv, { from: 'user' });
  const o = cmd.opts<
    TemporalFlags &
      GatewayFlags & {
        kubeconfig?: string;
        namespaces: string;
        role: OperatorConfig['role'];
        maxConcurrentActivities: number;
        maxConcurrentWorkflowTasks: number;
        maxConcurrentLocalActivities: number;
        maxCachedWorkflows?: number;
        maxStartingModels: number;
        shards: number;
        shardHash: ShardHash;
        leaseNamespace: string;
        identity: string;
        stickyQueueTimeout: number;
        gpuResourceName: string;
        clusterDomain: string;
        progressDeadline: number;
        driftCheck: number;
        readinessRecheck: number;
        gatewaySweep: number;
        watchTimeout: number;
        metricsPort: number;
        sdkMetricsPort: number;
        metricsHost: string;
        logLevel: string;
      }
  >();
  if (o.shards > 0 && o.role !== 'all')
    throw new InvalidArgumentError(
      "--shards needs --role all: a shard's workflows read the caches of the informer that watches it",
    );
  if (o.shards > maxShards) throw new InvalidArgumentError(`--shards must be at most ${maxShards}, got ${o.shards}`);
  const namespaces = o.namespaces
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    kubeconfig: o.kubeconfig,
    temporal: temporalConfigFrom(o),
    namespaces,
    role: o.role,
    maxConcurrentActivities: o.maxConcurrentActivities,
    maxConcurrentWorkflowTasks: o.maxConcurrentWorkflowTasks,
    maxConcurrentLocalActivities: o.maxConcurrentLocalActivities,
    maxCachedWorkflows: o.maxCachedWorkflows,
    maxStartingModels: o.maxStartingModels,
    sharding: { shards: o.shards, hash: o.shardHash, leaseNamespace: o.leaseNamespace, identity: o.identity },
    stickyQueueTimeoutSeconds: o.stickyQueueTimeout,
    build: {
      ...defaultBuildOptions,
      gpuResourceName: o.gpuResourceName,
      clusterDomain: o.clusterDomain,
    },
    workflow: {
      progressDeadlineSeconds: o.progressDeadline,
      driftCheckSeconds: o.driftCheck,
      readinessRecheckSeconds: {
        initial: o.readinessRecheck,
        max: Math.max(o.readinessRecheck, readinessRecheckMaxSeconds),
      },
    },
    gateway: gatewayConfigFrom(o),
    gatewaySweepSeconds: o.gatewaySweep,
    watchTimeoutSeconds: o.watchTimeout,
    metrics: { port: o.metricsPort, host: o.metricsHost, sdkPort: o.sdkMetricsPort },
    logLevel: o.logLevel,
  };
}
