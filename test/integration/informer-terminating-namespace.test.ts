// In a namespace being deleted, every child goes with its model: their changes (pods going, so
// Deployments losing availability) wake no round, which would only write status about to be deleted.
// The model's own events still wake it, so its deletion is handled.
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { expect, inject, it } from 'vitest';
import { childLabels, selectorLabels } from '../../src/core/desired-state.js';
import { resyncAnnotation } from '../../src/core/api.js';
import type { SignalRequest } from '../../src/informer/event-filter.js';
import { Informer } from '../../src/informer/informer.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { installCrds } from '../support/operator-process.js';
import { machineModel } from '../support/models.js';

const stack = inject('stack');
const k = kubectlFor(stack);
/** Holds the objects, and so the namespace, in Terminating while the test looks. */
const hold = 'test.example.com/hold';

it("wakes no model for its children's changes once their namespace is terminating", async () => {
  installCrds(stack);
  const ns = k.createNamespace('terminating');
  k.apply(machineModel(ns, 'held', {}, { finalizers: [hold] }));
  k.apply({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'held', namespace: ns, labels: childLabels('held'), finalizers: [hold] },
    spec: {
      replicas: 1,
      selector: { matchLabels: selectorLabels('held') },
      template: { metadata: { labels: selectorLabels('held') }, spec: { containers: [{ name: 'm', image: 'm:1' }] } },
    },
  });
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  const signalled: SignalRequest[] = [];
  const informer = new Informer(kc, (r) => signalled.push(r), pino({ level: 'silent' }), { namespaces: [ns] });
  await informer.start();
  const fromDeployment = () => signalled.filter((r) => r.hint.source === 'Deployment');
  try {
    k.kubectl('-n', ns, 'scale', 'deployment', 'held', '--replicas=2');
    await eventually('a live namespace: the change wakes the model', () =>
      fromDeployment().length > 0 ? true : undefined,
    );

    signalled.length = 0;
    k.kubectl('delete', 'namespace', ns, '--wait=false');
    await eventually('the model woken by its deletion', () =>
      signalled.some((r) => r.hint.source === 'MachineModel') ? true : undefined,
    );
    await sleep(1_000);
    signalled.length = 0;
    k.kubectl('-n', ns, 'scale', 'deployment', 'held', '--replicas=3');
    // The model's own event, after the child's change, still wakes it: then the child's would have come.
    k.kubectl('-n', ns, 'annotate', 'mm', 'held', `${resyncAnnotation}=now`);
    await eventually('the model woken by its own change', () =>
      signalled.some((r) => r.hint.source === 'MachineModel') ? true : undefined,
    );
    await sleep(1_000);
    expect(fromDeployment()).toEqual([]);
  } finally {
    await informer.stop();
    const release = JSON.stringify({ metadata: { finalizers: null } });
    k.kubectl('-n', ns, 'patch', 'deployment', 'held', '--type=merge', '-p', release);
    k.kubectl('-n', ns, 'patch', 'mm', 'held', '--type=merge', '-p', release);
  }
});
