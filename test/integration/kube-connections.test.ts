// The activities' Kubernetes client keeps its connections: client-node 2.0 alone opens a new TLS
// connection for every request, which cost the operator most of its CPU under load. A kept
// connection can die without a close; one missed deadline must be the whole cost of that.
import { randomUUID } from 'node:crypto';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, expect, inject, it } from 'vitest';
import { activityCancellation, WorkerStop } from '../../activities/cancellation.js';
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
  const api = apiClient(await kubeconfigViaProxy(), CoreV1Api, { timeoutMs: 1_000 });
  await api.readNamespace({ name: 'default' });
  proxy!.silence();
  await expect(api.readNamespace({ name: 'default' })).rejects.toThrow();
  proxy!.heal();
  // The kept connection is still dead: reusing it would miss this deadline too.
  expect((await api.readNamespace({ name: 'default' })).metadata?.name).toBe('default');
});

// A shard's worker that stops (its replica gave the shard up) cancels its activities; the next owner
// may write the same objects as soon as the worker is down. A request still waiting on its 15 s
// deadline could land after the new owner's write (seen in review: two writers for up to 9 s).
it("ends an activity's requests when the activity is cancelled, and sends none after", async () => {
  const kube = new KubeClient(await kubeconfigViaProxy());
  await kube.read('v1', 'Namespace', '', 'default');
  proxy!.silence();
  const env = new MockActivityEnvironment();
  const outcomes: unknown[] = [];
  let connectionsAfter: number | undefined;
  const activity = env.run(async () => {
    const pending = kube.read('v1', 'Namespace', '', 'kube-system').catch((err: unknown) => err);
    env.cancel('WORKER_SHUTDOWN');
    outcomes.push(await pending);
    proxy!.heal();
    const accepted = proxy!.accepted;
    outcomes.push(await kube.read('v1', 'Namespace', '', 'default').catch((err: unknown) => err));
    connectionsAfter = proxy!.accepted - accepted;
  });
  await activity.catch(() => undefined);
  expect(outcomes).toHaveLength(2);
  // The second was refused before it was sent, although the network was back.
  expect(connectionsAfter).toBe(0);
  for (const outcome of outcomes) expect(outcome).toBeInstanceOf(CancelledFailure);
}, 30_000);

// A stopping worker cancels its local activities not at all and its regular ones only after its grace
// time (seen in review: a local activity's request outliving the worker by its 8 s timeout).
it("ends a local activity's requests when its shard's worker stops, and a worker started again on the queue does not revive it", async () => {
  const kube = new KubeClient(await kubeconfigViaProxy());
  await kube.read('v1', 'Namespace', '', 'default');
  const queue = `q-${randomUUID()}`;
  // The interceptor the operator's workers install, one stop per worker.
  const draining = new WorkerStop();
  const env = new MockActivityEnvironment(
    { taskQueue: queue, isLocal: true },
    { interceptors: [draining.interceptor] },
  );
  proxy!.silence();
  const outcomes: unknown[] = [];
  let connectionsAfter: number | undefined;
  const next = new WorkerStop();
  await env.run(async () => {
    const pending = kube.read('v1', 'Namespace', '', 'kube-system').catch((err: unknown) => err);
    draining.stop();
    outcomes.push(await pending);
    proxy!.heal();
    const accepted = proxy!.accepted;
    outcomes.push(await kube.read('v1', 'Namespace', '', 'default').catch((err: unknown) => err));
    connectionsAfter = proxy!.accepted - accepted;
  });
  expect(outcomes).toHaveLength(2);
  expect(connectionsAfter).toBe(0);
  for (const outcome of outcomes) expect(outcome).toBeInstanceOf(CancelledFailure);
  // The shard taken back: a new worker on the queue while the old one drains. Its activities may run;
  // one the old worker starts afterwards is still stopped (seen in review: a stop kept per queue was
  // lifted by the new worker).
  const fresh = new MockActivityEnvironment({ taskQueue: queue, isLocal: true }, { interceptors: [next.interceptor] });
  const late = new MockActivityEnvironment(
    { taskQueue: queue, isLocal: true },
    { interceptors: [draining.interceptor] },
  );
  const signal = (await fresh.run(async () => activityCancellation())) as AbortSignal | undefined;
  const lateSignal = (await late.run(async () => activityCancellation())) as AbortSignal | undefined;
  expect(signal?.aborted).toBe(false);
  expect(lateSignal?.aborted).toBe(true);
}, 30_000);
