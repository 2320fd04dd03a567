// New models' workflows start a bounded number at a time: the informer, on a real apiserver, lets the
// next new model through only when one it let through says (in its status) that it is Ready or
// stalled. No worker runs here: the test writes the status a first round would.
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { expect, inject, it } from 'vitest';
import type { SignalRequest } from '../../src/informer/event-filter.js';
import { Informer } from '../../src/informer/informer.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { installCrds } from '../support/operator-process.js';
import { machineModel } from '../support/models.js';

const stack = inject('stack');
const k = kubectlFor(stack);

it('starts two new models at a time, the next when one of them settles, and a deleted waiting one never', async () => {
  installCrds(stack);
  const ns = k.createNamespace('start-gate');
  for (const name of ['m1', 'm2', 'm3', 'm4']) k.apply(machineModel(ns, name));
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  const signalled: SignalRequest[] = [];
  const informer = new Informer(kc, (r) => signalled.push(r), pino({ level: 'silent' }), {
    namespaces: [ns],
    maxStartingModels: 2,
  });
  const started = () => [...new Set(signalled.filter((r) => r.signal === 'reconcile').map((r) => r.name))].sort();
  await informer.start();
  try {
    await eventually('two models let through', () => (started().length === 2 ? true : undefined));
    await sleep(1_000);
    expect(started()).toEqual(['m1', 'm2']);
    expect(informer.startGate.waitingCount).toBe(2);

    /** The status a first round writes: still reconciling, or settled. */
    const firstRound = (reconciling: 'True' | 'False') => {
      const condition = {
        type: 'Reconciling',
        status: reconciling,
        reason: 'Test',
        message: 'written by the test',
        lastTransitionTime: new Date().toISOString(),
      };
      const status = JSON.stringify({ status: { observedGeneration: 1, conditions: [condition] } });
      k.kubectl('-n', ns, 'patch', 'mm', 'm1', '--subresource=status', '--type=merge', '-p', status);
    };
    firstRound('True');
    await sleep(1_000);
    expect(started()).toEqual(['m1', 'm2']);

    k.kubectl('-n', ns, 'delete', 'mm', 'm3');
    firstRound('False');
    await eventually('the next waiting model let through', () => (started().length === 3 ? true : undefined));
    expect(started()).toEqual(['m1', 'm2', 'm4']);
    expect(signalled.filter((r) => r.name === 'm3').map((r) => r.signal)).toEqual(['deleted']);
    expect(informer.startGate.waitingCount).toBe(0);
  } finally {
    await informer.stop();
  }
});
