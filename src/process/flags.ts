// The operator's command-line flags (commander), with environment variables as defaults (12-factor);
// what they mean, validated, is config.ts. The Temporal flags, which mmctl shares, are temporal-config.ts.
import { Command, InvalidArgumentError, Option } from 'commander';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { defaultBuildOptions } from '../core/desired-state.js';
import { defaultWorkflowConfig } from '../core/reconcile-timing.js';
import { startGateDefaults } from '../core/first-round.js';
import { shardHashes, type ShardHash } from '../core/shards.js';
import { temporalOptions, type TemporalFlags } from './temporal-config.js';

/**
 * The readiness rechecks of the workflows this operator starts (in their input, so runs already going
 * keep theirs): a safety net only. The watch wakes a model on every change of its rollout, its
 * autoscaler and its Pods' scheduling; at N=1000 rechecks every 10 s or more often were rounds that
 * found nothing new while the cluster took minutes to make Deployments available.
 */
const readinessRecheckSeconds = 60;
export const readinessRecheckMaxSeconds = 300;

export interface GatewayFlags {
  gateway: 'none' | 'caddy' | 'gateway-api';
  caddyAdmin: string;
  caddyServer: string;
  caddyListen: string;
  caddyUpstream: 'service-dns' | 'cluster-ip';
  gatewayParent?: string;
  gatewayPublicUrl?: string;
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

/** Which halves of the operator a process runs. */
export type OperatorRole = 'all' | 'worker' | 'informer';

/** The parsed flags, as commander names them. */
export type OperatorFlags = TemporalFlags &
  GatewayFlags & {
    kubeconfig?: string;
    namespaces: string;
    role: OperatorRole;
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
  };

export function operatorCommand(): Command {
  const cmd = temporalOptions(new Command('machinemodel-operator')).description(
    'Kubernetes operator for MachineModel resources; each resource is reconciled by a durable Temporal workflow',
  );
  for (const options of [
    scopeOptions,
    capacityOptions,
    shardingOptions,
    workflowOptions,
    gatewayOptions,
    processOptions,
  ])
    options(cmd);
  return cmd.exitOverride().configureOutput({ writeErr: (s) => process.stderr.write(s) });
}

/** What the operator watches, and which of its halves this process runs. */
function scopeOptions(cmd: Command): Command {
  return cmd
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
    );
}

/** How much work the worker takes on at once, and how many new models start at once. */
function capacityOptions(cmd: Command): Command {
  return cmd
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
    );
}

/** How replicas split the namespaces (docs/scaling.md). */
function shardingOptions(cmd: Command): Command {
  return cmd
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
    );
}

/** How long the workflows' tasks wait for this worker, what the workflows build, and their timers. */
function workflowOptions(cmd: Command): Command {
  return cmd
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
    );
}

/** The API gateway models are published on. */
function gatewayOptions(cmd: Command): Command {
  return cmd
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
    );
}

/** The watches' timeout, the endpoints and the log. */
function processOptions(cmd: Command): Command {
  return cmd
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
    );
}

/** The namespace of the ServiceAccount the operator runs as, when it runs in a Pod. */
function inClusterNamespace(): string | undefined {
  try {
    return readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/namespace', 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
