// Temporal unreachable for a while (every connection reset and refused by a TCP proxy in front of the
// real dev server): the informer keeps what it must signal, the worker waits, and once Temporal is
// back everything that changed meanwhile is reconciled. Nothing is dropped, nothing restarts.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../tools/local-stack/processes.js';
import { kubectlFor } from '../support/cluster.js';
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
let proxy: FaultyProxy;
let operator: OperatorProcess;
let ns: string;
let metricsPort: number;

const phaseOf = (name: string) => k.get('machinemodel', ns, name)?.status?.phase as string | undefined;
const ready = (name: string, timeoutMs = 60_000) =>
  eventually(`${name} Ready`, () => (phaseOf(name) === 'Ready' ? true : undefined), timeoutMs);

const metric = (name: string) => operatorMetric(metricsPort, name);

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('temporal-outage');
  const [host, port] = stack.temporalAddress.split(':');
  proxy = await FaultyProxy.start({ host: host!, port: Number(port) });
  metricsPort = await freePort();
  operator = startOperatorProcess(
    stack,
    {
      TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}`,
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: `mmo-${randomUUID()}`,
      MMO_METRICS_PORT: String(metricsPort),
    },
    'temporal-outage',
  );
});

afterAll(async () => {
  await operator?.stop();
  await proxy?.close();
});

describe('the operator while Temporal is unreachable', () => {
  it('keeps every change to signal, and reconciles them all when Temporal returns', async () => {
    k.apply(machineModel(ns, 'steady'));
    await ready('steady');

    proxy.reset();
    k.apply([machineModel(ns, 'new-1'), machineModel(ns, 'new-2')]);
    k.kubectl('-n', ns, 'patch', 'mm', 'steady', '--type=merge', '-p', '{"spec":{"minReplicas":2,"maxReplicas":2}}');
    const pending = await eventually('three models waiting to be signalled', async () =>
      (await metric('machinemodel_operator_signals_pending')) >= 3 ? true : undefined,
    );
    expect(pending).toBe(true);
    // A delivery to an unreachable Temporal takes seconds to fail (the client retries): wait for one.
    await eventually('a failed delivery counted', async () =>
      (await metric('machinemodel_operator_signal_failures_total')) > 0 ? true : undefined,
    );
    await sleep(5_000);
    // Nothing reconciled while Temporal was away.
    expect(phaseOf('new-1')).toBeUndefined();
    expect(operator.child.exitCode).toBeNull();
    proxy.heal();
    const healed = Date.now();

    await ready('new-1');
    await ready('new-2');
    await eventually('steady scaled to 2', () =>
      k.get('deployment', ns, 'steady')?.spec.replicas === 2 ? true : undefined,
    );
    await eventually('no signal left pending', async () =>
      (await metric('machinemodel_operator_signals_pending')) === 0 ? true : undefined,
    );
    console.log(`Temporal outage: all three changes reconciled ${Date.now() - healed}ms after Temporal returned`);
  }, 150_000);

  it('notices connections to Temporal that went silent, and carries on', async () => {
    k.apply(machineModel(ns, 'before-silence'));
    await ready('before-silence');
    // The open connections are dead from here on, without a reset or a close.
    proxy.silence();
    await sleep(3_000);
    proxy.heal();
    const healed = Date.now();
    k.apply(machineModel(ns, 'after-silence'));
    await ready('after-silence', 150_000);
    console.log(`silent Temporal connections: a new model Ready ${Date.now() - healed}ms after the network healed`);
  }, 200_000);

  it('still shuts down gracefully afterwards', async () => {
    expect(await operator.stop()).toBe(0);
  }, 60_000);
});
