// An operator that starts before what it depends on: Temporal or the apiserver unreachable when the
// process starts (its Pod scheduled before Temporal's, a control plane restarting). It stays up, says
// why in one clear line, answers /readyz with 503 (and /healthz with 200, so it is not restarted for
// it), and starts working when they come, with no restart. Real processes, real servers, a TCP proxy
// that refuses connections in between.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../tools/local-stack/processes.js';
import { kubeconfigThrough, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { FaultyProxy } from '../support/faulty-proxy.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  operatorKubeconfig,
  operatorLog,
  operatorProbe,
  startOperatorProcess,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const warn = 40;

const phaseOf = k.phaseOf.bind(k);

/** Starts the operator with the given proxy refusing every connection; returns what the test needs. */
async function startCutOff(target: { host: string; port: number }, env: (proxyPort: number) => Record<string, string>) {
  const proxy = await FaultyProxy.start(target);
  proxy.reset();
  const metricsPort = await freePort();
  const ns = k.createNamespace('startup');
  const operator = startOperatorProcess(
    stack,
    {
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
      MMO_METRICS_PORT: String(metricsPort),
      ...env(proxy.port),
    },
    'startup',
  );
  const probe = (path: '/healthz' | '/readyz') => operatorProbe(metricsPort, path);
  return { proxy, operator, ns, probe };
}

/** Warnings and errors in the operator's log. */
const complaints = (operator: OperatorProcess) => operatorLog(operator).filter((l) => l.level >= warn);

beforeAll(() => installCrds(stack));

describe('an operator started while Temporal is unreachable', () => {
  let cut: Awaited<ReturnType<typeof startCutOff>>;
  const [host, port] = stack.temporalAddress.split(':');

  beforeAll(async () => {
    cut = await startCutOff({ host: host!, port: Number(port) }, (p) => ({ TEMPORAL_ADDRESS: `127.0.0.1:${p}` }));
  });
  afterAll(async () => {
    await cut?.operator.stop();
    await cut?.proxy.close();
  });

  it('stays up, says so in one clear line, and is live but not ready', async () => {
    await eventually('/healthz answering', async () => (await cut.probe('/healthz')).status === 200);
    const line = await eventually('the line saying Temporal is unreachable', () =>
      complaints(cut.operator).find((l) => /Temporal/.test(l.msg)),
    );
    // The proxy accepts and resets each connection: the reason (a reset, a broken pipe, a closed
    // connection, depending on timing) in words, without the transport library's wrapping.
    expect(line.msg).toMatch(/^Temporal at 127\.0\.0\.1:\d+: [^;]+; waiting for it/);
    expect(line.msg).not.toMatch(/tonic|hyper/);
    // Several retries later: still up, still one line, never the transport library's raw error.
    await sleep(8_000);
    expect(cut.operator.child.exitCode).toBeNull();
    expect(complaints(cut.operator).filter((l) => /Temporal/.test(l.msg))).toHaveLength(1);
    expect(
      complaints(cut.operator)
        .map((l) => l.msg)
        .join('\n'),
    ).not.toContain('tonic');
    const ready = await cut.probe('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(/Temporal/);
  }, 60_000);

  it('starts working when Temporal comes: ready, and a model applied meanwhile is reconciled', async () => {
    k.apply(machineModel(cut.ns, 'waited'));
    await sleep(2_000);
    expect(phaseOf(cut.ns, 'waited')).toBeUndefined();
    cut.proxy.heal();
    await eventually('/readyz 200', async () => (await cut.probe('/readyz')).status === 200, 60_000);
    await eventually('waited Ready', () => phaseOf(cut.ns, 'waited') === 'Ready', 60_000);
    expect(cut.operator.child.exitCode).toBeNull();
  }, 120_000);

  it('is not ready while Temporal is away later, and ready again when it returns', async () => {
    cut.proxy.reset();
    const away = await eventually('/readyz 503', async () => {
      const r = await cut.probe('/readyz');
      return r.status === 503 ? r : undefined;
    });
    expect(away.body).toMatch(/Temporal/);
    cut.proxy.heal();
    await eventually('/readyz 200 again', async () => (await cut.probe('/readyz')).status === 200, 60_000);
  }, 120_000);
});

describe('an operator started while the apiserver is unreachable', () => {
  let cut: Awaited<ReturnType<typeof startCutOff>>;

  beforeAll(async () => {
    cut = await startCutOff({ host: '127.0.0.1', port: stack.ports.apiserver }, (p) => ({
      KUBECONFIG: kubeconfigThrough({ ...stack, kubeconfig: operatorKubeconfig(stack) }, p),
    }));
  });
  afterAll(async () => {
    await cut?.operator.stop();
    await cut?.proxy.close();
  });

  it('stays up, says so in one clear line, and is not ready before its informer has listed', async () => {
    await eventually('/healthz answering', async () => (await cut.probe('/healthz')).status === 200);
    const line = await eventually('the line saying the Kubernetes API is unreachable', () =>
      complaints(cut.operator).find((l) => /Kubernetes API/.test(l.msg)),
    );
    expect(line.msg).toContain(`https://127.0.0.1:`);
    await sleep(8_000);
    expect(cut.operator.child.exitCode).toBeNull();
    expect(complaints(cut.operator).filter((l) => /Kubernetes API|list\/watch/.test(l.msg))).toHaveLength(1);
    const ready = await cut.probe('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(/informer/);
  }, 60_000);

  it('starts working when the apiserver answers', async () => {
    k.apply(machineModel(cut.ns, 'waited'));
    cut.proxy.heal();
    await eventually('/readyz 200', async () => (await cut.probe('/readyz')).status === 200, 60_000);
    await eventually('waited Ready', () => phaseOf(cut.ns, 'waited') === 'Ready', 60_000);
    expect(cut.operator.child.exitCode).toBeNull();
  }, 120_000);
});
