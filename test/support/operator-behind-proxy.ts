// The operator process with a faulty TCP proxy between it and Temporal or the apiserver, in a namespace
// of its own: what the network-fault tests share. Registers its own beforeAll/afterAll.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from '../../tools/local-stack/processes.js';
import type { StackInfo } from '../../tools/local-stack/stack.js';
import { kubeconfigThrough, kubectlFor } from './cluster.js';
import { eventually } from './eventually.js';
import { FaultyProxy } from './faulty-proxy.js';
import {
  installCrds,
  operatorKubeconfig,
  operatorMetric,
  startOperatorProcess,
  type OperatorProcess,
} from './operator-process.js';

export interface OperatorBehindProxy {
  readonly proxy: FaultyProxy;
  readonly operator: OperatorProcess;
  readonly ns: string;
  metric(name: string): Promise<number>;
  ready(name: string, timeoutMs?: number): Promise<true>;
}

export function operatorBehindProxy(
  stack: StackInfo,
  cutOff: 'temporal' | 'apiserver',
  name: string,
  env: Record<string, string> = {},
): OperatorBehindProxy {
  const k = kubectlFor(stack);
  let proxy: FaultyProxy;
  let operator: OperatorProcess;
  let ns: string;
  let metricsPort: number;
  beforeAll(async () => {
    installCrds(stack);
    ns = k.createNamespace(name);
    const [host, port] =
      cutOff === 'temporal' ? stack.temporalAddress.split(':') : ['127.0.0.1', stack.ports.apiserver];
    proxy = await FaultyProxy.start({ host: host!, port: Number(port) });
    metricsPort = await freePort();
    const through: { stack: StackInfo; env: Record<string, string> } =
      cutOff === 'temporal'
        ? { stack, env: { TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}` } }
        : {
            stack,
            env: { KUBECONFIG: kubeconfigThrough({ ...stack, kubeconfig: operatorKubeconfig(stack) }, proxy.port) },
          };
    operator = startOperatorProcess(
      through.stack,
      {
        ...through.env,
        MMO_NAMESPACES: ns,
        MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
        MMO_METRICS_PORT: String(metricsPort),
        ...env,
      },
      name,
    );
  });
  afterAll(async () => {
    await operator?.stop();
    await proxy?.close();
  });
  return {
    get proxy() {
      return proxy;
    },
    get operator() {
      return operator;
    },
    get ns() {
      return ns;
    },
    metric: (metricName) => operatorMetric(metricsPort, metricName),
    ready: (model, timeoutMs = 60_000) =>
      eventually(`${model} Ready`, () => (k.phaseOf(ns, model) === 'Ready' ? true : undefined), timeoutMs),
  };
}
