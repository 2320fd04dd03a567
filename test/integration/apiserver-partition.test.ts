// The operator cut off from a real apiserver by a network fault, then reconnected: changes made in
// the meantime are reconciled without anyone restarting it.
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
  operatorMetric,
  startOperatorProcess,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
/** Each watch is ended by the server after this, so silence past it means a dead connection. */
const watchTimeoutSeconds = 4;
let proxy: FaultyProxy;
let operator: OperatorProcess;
let ns: string;
let metricsPort: number;

const phaseOf = (name: string) => k.get('machinemodel', ns, name)?.status?.phase as string | undefined;
const ready = (name: string, timeoutMs = 60_000) =>
  eventually(`${name} Ready`, () => (phaseOf(name) === 'Ready' ? true : undefined), timeoutMs);

const watchRestarts = () => operatorMetric(metricsPort, 'machinemodel_operator_watch_restarts_total');

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('partition');
  proxy = await FaultyProxy.start({ host: '127.0.0.1', port: stack.ports.apiserver });
  metricsPort = await freePort();
  operator = startOperatorProcess(
    { ...stack, kubeconfig: kubeconfigThrough(stack, proxy.port) },
    {
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
      MMO_WATCH_TIMEOUT_SECONDS: String(watchTimeoutSeconds),
      MMO_METRICS_PORT: String(metricsPort),
    },
    'partition',
  );
});

afterAll(async () => {
  await operator?.stop();
  await proxy?.close();
});

describe('the operator and a network fault between it and the apiserver', () => {
  it('reconciles what changed while every connection was reset and refused', async () => {
    k.apply(machineModel(ns, 'before-reset'));
    await ready('before-reset');
    const restartsBefore = await watchRestarts();

    proxy.reset();
    k.apply(machineModel(ns, 'during-reset'));
    k.kubectl(
      '-n',
      ns,
      'patch',
      'mm',
      'before-reset',
      '--type=merge',
      '-p',
      '{"spec":{"minReplicas":2,"maxReplicas":2}}',
    );
    await sleep(5_000);
    proxy.heal();

    await ready('during-reset');
    await eventually('before-reset scaled to 2', () =>
      k.get('deployment', ns, 'before-reset')?.spec.replicas === 2 ? true : undefined,
    );
    expect(await watchRestarts()).toBeGreaterThan(restartsBefore);
  }, 120_000);

  it('restarts watches whose connections went silent, without a reset or a close', async () => {
    k.apply(machineModel(ns, 'before-silence'));
    await ready('before-silence');
    const restartsBefore = await watchRestarts();

    // The open watches are dead from here on; the apiserver's end of each never reaches the operator.
    proxy.silence();
    await sleep(2_000);
    proxy.heal();
    k.apply(machineModel(ns, 'after-silence'));

    // Without the watchdog nothing would notice for as long as TCP keepalive takes (over ten minutes).
    await ready('after-silence');
    expect(await watchRestarts()).toBeGreaterThan(restartsBefore);
  }, 120_000);

  it('still shuts down gracefully: no request hangs on a dead connection', async () => {
    const started = Date.now();
    expect(await operator.stop()).toBe(0);
    console.log(`operator stopped ${Date.now() - started}ms after SIGTERM`);
  }, 60_000);
});
