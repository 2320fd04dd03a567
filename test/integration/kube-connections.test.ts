// The activities' Kubernetes client keeps its connections: client-node 2.0 alone opens a new TLS
// connection for every request, which cost the operator most of its CPU under load.
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { KubeClient } from '../../activities/kube-client.js';
import { kubeconfigThrough } from '../support/cluster.js';
import { FaultyProxy } from '../support/faulty-proxy.js';

const stack = inject('stack');
let proxy: FaultyProxy;

beforeAll(async () => {
  proxy = await FaultyProxy.start({ host: '127.0.0.1', port: stack.ports.apiserver });
});
afterAll(async () => {
  await proxy?.close();
});

it('sends many requests over few connections', async () => {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigThrough(stack, proxy.port));
  const kube = new KubeClient(kc);
  for (let i = 0; i < 20; i++) {
    await kube.read('v1', 'Service', 'default', 'kubernetes');
    await kube.getModel('default', 'no-such-model');
  }
  await Promise.all(Array.from({ length: 5 }, () => kube.read('v1', 'Namespace', '', 'default')));
  console.log(`45 requests over ${proxy.accepted} connections`);
  // Sequential requests share one connection; the five concurrent ones may open one each.
  expect(proxy.accepted).toBeLessThanOrEqual(6);
});
