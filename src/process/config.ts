// Operator configuration: what the flags (flags.ts) mean, validated up front so that a bad value is
// one clear line, not a failure deep inside a client.
import { InvalidArgumentError } from 'commander';
import { defaultBuildOptions, type BuildOptions } from '../core/desired-state.js';
import type { WorkflowConfig } from '../core/reconcile-timing.js';
import { maxShards, type ShardHash } from '../core/shards.js';
import {
  operatorCommand,
  readinessRecheckMaxSeconds,
  type GatewayFlags,
  type OperatorFlags,
  type OperatorRole,
} from './flags.js';
import { temporalConfigFrom, type TemporalConfig } from './temporal-config.js';

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
  role: OperatorRole;
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

/** Every environment variable the operator reads: a manifest that sets any other has a typo. */
export function operatorEnvironment(): string[] {
  const fromOptions = operatorCommand().options.flatMap((o) => (o.envVar ? [o.envVar] : []));
  // NODE_OPTIONS is Node's own: the Deployment sizes the heaps with it.
  return [...fromOptions, 'TEMPORAL_API_KEY', 'NODE_OPTIONS'];
}

export function parseOperatorConfig(argv: string[]): OperatorConfig {
  const cmd = operatorCommand();
  cmd.parse(argv, { from: 'user' });
  const o = cmd.opts<OperatorFlags>();
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
