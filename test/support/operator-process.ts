import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { writeServiceAccountKubeconfig } from '../../tools/local-stack/kubeconfig.js';
import { freePort } from '../../tools/local-stack/processes.js';
import { kubectlRun, type StackInfo } from '../../tools/local-stack/stack.js';
import type { ShardLayout } from '../../src/core/shards.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The CRD of this checkout, or of `checkout` (an earlier release's, built by release-build.ts). */
export function installCrds(stack: StackInfo, checkout = root): void {
  kubectlRun(stack, ['apply', '--server-side', '--force-conflicts', '-k', path.join(checkout, 'crds')]);
  kubectlRun(stack, ['wait', '--for=condition=Established', 'crd/machinemodels.stable.example.com', '--timeout=30s']);
}

const serviceAccountKubeconfigs = new Map<string, string>();

/**
 * A kubeconfig of the operator's own ServiceAccount under this checkout's deploy/operator/rbac.yaml
 * (applied here), as users install it: what a feature needs and the installed RBAC lacks fails the test.
 */
export function operatorKubeconfig(stack: StackInfo): string {
  const made = serviceAccountKubeconfigs.get(stack.stateDir);
  if (made) return made;
  const manifests = path.join(root, 'deploy/operator');
  for (const f of ['namespace.yaml', 'serviceaccount.yaml', 'rbac.yaml'])
    kubectlRun(stack, ['apply', '-f', path.join(manifests, f)]);
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'mmo-sa-')), 'kubeconfig');
  writeServiceAccountKubeconfig({
    kubectl: stack.binaries.kubectl,
    adminKubeconfig: stack.kubeconfig,
    namespace: 'machinemodel-system',
    serviceAccount: 'machinemodel-operator',
    file,
  });
  serviceAccountKubeconfigs.set(stack.stateDir, file);
  return file;
}

export interface OperatorProcess {
  child: ChildProcess;
  /** SIGTERM and wait; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: no chance to clean up, as when a node dies. */
  kill(): Promise<void>;
  logFile: string;
}

/**
 * Runs the real operator entry point as a separate process, compiled, as the image runs it (npm run
 * build): this checkout's, or the one in `checkout` (an earlier release, built by release-build.ts).
 * It acts as its ServiceAccount (operatorKubeconfig) unless `env` names another KUBECONFIG.
 */
export function startOperatorProcess(
  stack: StackInfo,
  env: Record<string, string>,
  name = 'operator',
  checkout = root,
): OperatorProcess {
  const logDir = path.join(stack.stateDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  const logFile = path.join(logDir, `${name}-${Date.now()}.log`);
  const log = createWriteStream(logFile);
  const child = spawn(process.execPath, [path.join(checkout, 'dist/src/main.js')], {
    cwd: checkout,
    env: {
      ...process.env,
      KUBECONFIG: env.KUBECONFIG ?? operatorKubeconfig(stack),
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_NAMESPACE: stack.temporalNamespace,
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    logFile,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

export async function temporalClient(stack: StackInfo): Promise<Client> {
  const connection = await Connection.connect({ address: stack.temporalAddress });
  return new Client({ connection, namespace: stack.temporalNamespace });
}

/** One sample of the operator's Prometheus metrics (served with MMO_METRICS_PORT); NaN when absent. */
export async function operatorMetric(port: number, series: string): Promise<number> {
  const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return seriesValue(body, series);
}

/** The value of one series (`name` or `name{label="value",...}` as exposed) in a Prometheus text body; NaN if absent. */
export function seriesValue(body: string, series: string): number {
  const escaped = series.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return Number(new RegExp(`^${escaped} ([-+.\\deE]+|NaN)$`, 'm').exec(body)?.[1] ?? NaN);
}

/** One answer of the operator's health endpoints (served with MMO_METRICS_PORT). */
export async function operatorProbe(
  port: number,
  path: '/healthz' | '/readyz',
): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

/** The operator's log so far, one parsed JSON object per line (lines that are not JSON are kept as msg). */
export function operatorLog(operator: OperatorProcess): { level: number; msg: string; [key: string]: unknown }[] {
  return readFileSync(operator.logFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      try {
        return JSON.parse(line) as { level: number; msg: string };
      } catch {
        return { level: 50, msg: line };
      }
    });
}

export interface ShardedReplica {
  identity: string;
  /** Its /metrics port. */
  metrics: number;
  process: OperatorProcess;
}

/**
 * One replica of a sharded operator (--shards and --shard-hash, Leases in machinemodel-system, as
 * installed), as its ServiceAccount, with a unique identity and its metrics served; `env` adds the
 * queue, namespaces, ….
 */
export async function startShardedReplica(
  stack: StackInfo,
  layout: ShardLayout,
  name: string,
  env: Record<string, string>,
): Promise<ShardedReplica> {
  const identity = `${name}-${randomUUID().slice(0, 6)}`;
  const metrics = await freePort();
  const process = startOperatorProcess(
    stack,
    {
      ...env,
      MMO_SHARDS: String(layout.count),
      MMO_SHARD_HASH: layout.hash,
      MMO_LEASE_NAMESPACE: 'machinemodel-system',
      MMO_IDENTITY: identity,
      MMO_METRICS_PORT: String(metrics),
    },
    name,
  );
  return { identity, metrics, process };
}

/** How many shards a replica holds, as its metrics say; NaN while it does not answer. */
export function shardsHeld(replica: ShardedReplica): Promise<number> {
  return operatorMetric(replica.metrics, 'machinemodel_operator_shards_held').catch(() => NaN);
}
