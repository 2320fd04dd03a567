// The activities' Kubernetes client keeps its connections: client-node 2.0 alone opens a new TLS
// connection for every request, which cost the operator most of its CPU under load. A kept
// connection can die without a close; one missed deadline must be the whole cost of that.
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterEach, expect, inject, it } from 'vitest';
import { KubeClient } from '../../activities/kube-client.js';
import { apiClient } from '../../src/process/kube-api.js';
import { kubeconfigThrough } from '../support/cluster.js';
import { FaultyProxy } from '../support/faulty-proxy.js';

const stack = inject('stack');
let proxy: FaultyProxy | undefined;

async function kubeconfigViaProxy(): Promise<KubeConfig> {
  proxy = await FaultyProxy.start({ host: '127.0.0.1', port: stack.ports.apiserver });
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigThrough(stack, proxy.port));
  return kc;
}

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

it('sends many requests over few connections', async () => {
  const kube = new KubeClient(await kubeconfigViaProxy());
  for (let i = 0; i < 20; i++) {
    await kube.read('v1', 'Service', 'default', 'kubernetes');
    await kube.getModel('default', 'no-such-model');
  }
  await Promise.all(Array.from({ length: 5 }, () => kube.read('v1', 'Namespace', '', 'default')));
  console.log(`45 requests over ${proxy!.accepted} connections`);
  // Sequential requests share one connection; the five concurrent ones may open one each.
  expect(proxy!.accepted).toBeLessThanOrEqual(6);
});

it('after a request on a connection that went silent misses its deadline, the next one gets a new connection', async () => {
  const api = apiClient(await kubeconfigViaProxy(), CoreV1Api, 1_000);
  await api.readNamespace({ name: 'default' });
  proxy!.silence();
  await expect(api.readNamespace({ name: 'default' })).rejects.toThrow();
  proxy!.heal();
  // The kept connection is still dead: reusing it would miss this deadline too.
  expect((await api.readNamespace({ name: 'default' })).metadata?.name).toBe('default');
});
