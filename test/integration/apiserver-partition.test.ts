// The operator cut off from a real apiserver by a network fault, then reconnected: changes made in
// the meantime are reconciled without anyone restarting it.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, inject, it } from 'vitest';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { operatorBehindProxy } from '../support/operator-behind-proxy.js';
import { machineModel } from '../support/models.js';

const stack = inject('stack');
const k = kubectlFor(stack);
/** Each watch is ended by the server after this, so silence past it means a dead connection. */
const watchTimeoutSeconds = 4;
const cut = operatorBehindProxy(stack, 'apiserver', 'partition', {
  MMO_WATCH_TIMEOUT_SECONDS: String(watchTimeoutSeconds),
});
const { ready } = cut;
const watchRestarts = () => cut.metric('machinemodel_operator_watch_restarts_total');

describe('the operator and a network fault between it and the apiserver', () => {
  it('reconciles what changed while every connection was reset and refused', async () => {
    k.apply(machineModel(cut.ns, 'before-reset'));
    await ready('before-reset');
    const restartsBefore = await watchRestarts();

    cut.proxy.reset();
    k.apply(machineModel(cut.ns, 'during-reset'));
    k.kubectl(
      '-n',
      cut.ns,
      'patch',
      'mm',
      'before-reset',
      '--type=merge',
      '-p',
      '{"spec":{"minReplicas":2,"maxReplicas":2}}',
    );
    await sleep(5_000);
    cut.proxy.heal();

    await ready('during-reset');
    await eventually('before-reset scaled to 2', () =>
      k.get('deployment', cut.ns, 'before-reset')?.spec.replicas === 2 ? true : undefined,
    );
    expect(await watchRestarts()).toBeGreaterThan(restartsBefore);
  }, 120_000);

  it('restarts watches whose connections went silent, without a reset or a close', async () => {
    k.apply(machineModel(cut.ns, 'before-silence'));
    await ready('before-silence');
    const restartsBefore = await watchRestarts();

    // The open watches are dead from here on; the apiserver's end of each never reaches the cut.operator.
    cut.proxy.silence();
    await sleep(2_000);
    cut.proxy.heal();
    k.apply(machineModel(cut.ns, 'after-silence'));

    // Without the watchdog nothing would notice for as long as TCP keepalive takes (over ten minutes).
    await ready('after-silence');
    expect(await watchRestarts()).toBeGreaterThan(restartsBefore);
  }, 120_000);

  it('still shuts down gracefully: no request hangs on a dead connection', async () => {
    const started = Date.now();
    expect(await cut.operator.stop()).toBe(0);
    console.log(`operator stopped ${Date.now() - started}ms after SIGTERM`);
  }, 60_000);
});
