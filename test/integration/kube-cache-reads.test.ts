// The worker reads from the informer's caches (as controller-runtime's client does): a read after
// the process's own write must see that write, although the watch has not delivered it yet; an
// object the label-filtered child watches cannot see is still found.
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig, type V1Pod, type V1Service } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { applyChildrenActivity } from '../../activities/apply-children.js';
import { KubeClient } from '../../activities/kube-client.js';
import { childLabels, defaultBuildOptions } from '../../src/core/desired-state.js';
import { unschedulablePods } from '../../src/core/pod-scheduling.js';
import { isReady } from '../../src/core/status.js';
import type { MachineModelStatus } from '../../src/core/api.js';
import type { SignalRequest } from '../../src/informer/event-filter.js';
import { Informer } from '../../src/informer/informer.js';
import { writeServiceAccountKubeconfig } from '../../tools/local-stack/kubeconfig.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { installCrds } from '../support/operator-process.js';
import { machineModel } from '../support/models.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let ns: string;
let informer: Informer;
let kube: KubeClient;
const signalled: SignalRequest[] = [];

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('cache-reads');
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  kube = new KubeClient(kc);
  informer = new Informer(kc, (r) => signalled.push(r), pino({ level: 'silent' }), {
    namespaces: [ns],
  });
  await informer.start();
  kube.readFrom(informer);
});

afterAll(async () => {
  await informer?.stop();
});

it('serves a model from the cache, and each read after its own status write sees that write', async () => {
  k.apply(machineModel(ns, 'cached'));
  await eventually('the model in the cache', () => (informer.lookup('MachineModel', ns, 'cached') ? true : undefined));
  const before = { ...kube.reads };
  expect((await kube.getModel(ns, 'cached'))?.metadata.name).toBe('cached');
  expect(kube.reads.cache).toBe(before.cache + 1);
  expect(kube.reads.apiserver).toBe(before.apiserver);

  for (let i = 0; i < 20; i++) {
    const status: MachineModelStatus = { phase: 'Deploying', replicas: i };
    await kube.patchModelStatus(ns, 'cached', status);
    expect((await kube.getModel(ns, 'cached'))?.status?.replicas).toBe(i);
  }
  // Once the watch has delivered the last write, the cache serves the model again.
  await eventually('the cache to catch up', () => {
    const cached = informer.lookup('MachineModel', ns, 'cached');
    return cached !== 'unknown' && (cached as { status?: MachineModelStatus })?.status?.replicas === 19
      ? true
      : undefined;
  });
  const caught = { ...kube.reads };
  expect((await kube.getModel(ns, 'cached'))?.status?.replicas).toBe(19);
  expect(kube.reads.cache).toBe(caught.cache + 1);
});

it('reads a child it applied at once, and finds an object the label-filtered watch does not see', async () => {
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'labelled', namespace: ns, labels: { 'app.kubernetes.io/managed-by': 'machinemodel-operator' } },
    spec: { ports: [{ port: 80 }] },
  };
  for (let port = 80; port < 90; port++) {
    await kube.apply({ ...service, spec: { ports: [{ port }] } });
    const read = await kube.read<V1Service>('v1', 'Service', ns, 'labelled');
    expect(read?.spec?.ports?.[0]?.port).toBe(port);
  }
  const cached = await eventually('the cache to hold the last apply', () => {
    const cached = informer.lookup('Service', ns, 'labelled') as V1Service | undefined;
    return cached?.spec?.ports?.[0]?.port === 89 ? cached : undefined;
  });
  // What the apiserver records of who applied which field: kilobytes per object the operator never reads.
  const stored = JSON.parse(
    k.kubectl('-n', ns, 'get', 'service', 'labelled', '-o', 'json', '--show-managed-fields'),
  ) as V1Service;
  expect(stored.metadata?.managedFields?.length).toBeGreaterThan(0);
  expect(cached.metadata?.managedFields).toBeUndefined();
  await kube.delete(service);
  expect(await kube.read('v1', 'Service', ns, 'labelled')).toBeUndefined();
  k.apply({ ...service, metadata: { name: 'foreign', namespace: ns } });
  expect(informer.lookup('Service', ns, 'foreign')).toBeUndefined();
  expect((await kube.read('v1', 'Service', ns, 'foreign'))?.metadata?.name).toBe('foreign');
});

it('after a restart, the children its first list finds are as written: a round applies nothing', async () => {
  const spec = machineModel(ns, 'restarted', { minReplicas: 1, maxReplicas: 3 });
  k.apply(spec);
  const ref = { namespace: ns, name: 'restarted', uid: k.get('machinemodel', ns, 'restarted').metadata.uid };
  const snapshot = { ref, generation: 1, deleting: false, hasFinalizer: true, spec: spec.spec, specErrors: [] };
  const first = await applyChildrenActivity({ kube, build: defaultBuildOptions })(snapshot);
  expect(first.changes).toEqual(['Deployment created', 'Service created', 'HorizontalPodAutoscaler created']);

  // Another process starts: its informer lists the children (a list's items carry no kind).
  const kc = new KubeConfig();
  kc.loadFromFile(stack.kubeconfig);
  const restarted = new KubeClient(kc);
  const its = new Informer(kc, () => undefined, pino({ level: 'silent' }), {
    namespaces: [ns],
  });
  await its.start();
  // Pods are optional, so start() does not wait for their list.
  await eventually('the Pods listed', () => its.list('Pod', ns) !== 'unknown');
  try {
    restarted.readFrom(its);
    const before = { ...restarted.reads };
    const again = await applyChildrenActivity({ kube: restarted, build: defaultBuildOptions })(snapshot);
    expect(again.changes).toEqual([]);
    expect(again.written).toEqual([]);
    // The Deployment, the Service, the autoscaler, the canary's Deployment (none: a canary left by an
    // earlier rollout would be removed), and the Pods if the rollout is not yet Ready.
    expect(restarted.reads.cache - before.cache).toBe(isReady(again.readiness!) ? 4 : 5);
    expect(restarted.reads.apiserver).toBe(before.apiserver);
  } finally {
    await its.stop();
  }
});

it('asks the apiserver nothing about an autoscaler a model without autoscaling does not have, and leaves one it did not make alone', async () => {
  const spec = machineModel(ns, 'plain');
  k.apply(spec);
  k.apply({
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: { name: 'plain', namespace: ns },
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'other' },
      minReplicas: 1,
      maxReplicas: 2,
    },
  });
  const ref = { namespace: ns, name: 'plain', uid: k.get('machinemodel', ns, 'plain').metadata.uid };
  const snapshot = { ref, generation: 1, deleting: false, hasFinalizer: false, spec: spec.spec, specErrors: [] };
  const before = { ...kube.reads };
  const applied = await applyChildrenActivity({ kube, build: defaultBuildOptions })(snapshot);
  expect(applied.changes).toEqual(['Deployment created', 'Service created']);
  // The Deployment and the Service are new: asked once each, as an unlabelled one would not be in the cache.
  expect(kube.reads.apiserver - before.apiserver).toBe(2);
  expect(k.get('horizontalpodautoscaler', ns, 'plain').spec.scaleTargetRef.name).toBe('other');
});

it('wakes a model as soon as the scheduler cannot place one of its Pods, and reads Pods from a cache that keeps only their scheduling and container health', async () => {
  k.apply(machineModel(ns, 'stuck'));
  await eventually('the model in the cache', () => (informer.lookup('MachineModel', ns, 'stuck') ? true : undefined));
  const pod = (name: string, model: string) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels: childLabels(model) },
    spec: { nodeSelector: { 'no-such-node': 'anywhere' }, containers: [{ name: 'server', image: 'model:1' }] },
  });
  k.apply(pod('stuck-1', 'stuck'));
  k.apply(pod('other-1', 'other'));
  const woken = await eventually('a signal from the Pod', () =>
    signalled.find((r) => r.name === 'stuck' && r.hint.source === 'Pod'),
  );
  expect(woken).toMatchObject({ namespace: ns, signal: 'reconcile', hint: { event: 'updated' } });

  const cached = informer.lookup('Pod', ns, 'stuck-1') as V1Pod;
  // Of the spec, only what container troubles name: each container's name, image and limits.
  expect(cached.spec).toEqual({ containers: [{ name: 'server', image: 'model:1', resources: {} }] });
  expect(cached.metadata?.managedFields).toBeUndefined();
  expect(cached.status?.conditions?.map((c) => c.type)).toEqual(['PodScheduled']);

  const before = { ...kube.reads };
  const pods = await kube.listPods(ns, 'stuck');
  expect(pods.map((p) => p.metadata?.name)).toEqual(['stuck-1']);
  expect(unschedulablePods(pods)?.message).toContain('node(s) didn');
  expect(kube.reads).toEqual({ cache: before.cache + 1, apiserver: before.apiserver });
});

it('wakes a model when the kubelet reports a failing readiness probe of one of its Pods, once per message', async () => {
  k.apply(machineModel(ns, 'probed'));
  k.apply({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'probed-1', namespace: ns, labels: childLabels('probed') },
    spec: { nodeSelector: { 'no-such-node': 'anywhere' }, containers: [{ name: 'model', image: 'model:1' }] },
  });
  await eventually('the Pod in the cache', () => (informer.lookup('Pod', ns, 'probed-1') ? true : undefined));
  // What the kubelet writes when a readiness probe fails: an Event about the Pod, nothing in the Pod.
  const unhealthy = (name: string, message: string, count = 1) => ({
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name, namespace: ns },
    involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'probed-1', namespace: ns },
    reason: 'Unhealthy',
    type: 'Warning',
    message,
    count,
    source: { component: 'kubelet', host: 'real-node-0' },
  });
  const fromProbes = () => signalled.filter((r) => r.name === 'probed' && r.hint.source === 'Event');
  k.apply(unhealthy('probed-1.a', 'Readiness probe failed: HTTP probe failed with statuscode: 503'));
  await eventually('a signal from the probe failure', () => (fromProbes().length === 1 ? true : undefined));
  expect(fromProbes()[0]).toMatchObject({ namespace: ns, signal: 'reconcile', hint: { event: 'added' } });
  // The same failure again (a higher count on the same Event), then another kind of Event: no signal.
  k.apply(unhealthy('probed-1.a', 'Readiness probe failed: HTTP probe failed with statuscode: 503', 2));
  k.apply({ ...unhealthy('probed-1.b', 'Back-off restarting failed container'), reason: 'BackOff' });
  k.apply(unhealthy('probed-1.c', 'Readiness probe failed: connection refused'));
  // One watch delivers in order: once the last one's signal is here, the two before it were judged.
  const last = k.get('event', ns, 'probed-1.c').metadata.resourceVersion;
  await eventually('the signal of the last one', () =>
    fromProbes().some((r) => r.hint.resourceVersion === last) ? true : undefined,
  );
  expect(fromProbes().map((r) => r.hint.event)).toEqual(['added', 'added']);
});

it('starts, and lists Pods from the apiserver, under a role that may not watch them (one that predates the Pod watch)', async () => {
  const rule = (apiGroups: string[], resources: string[], verbs = ['get', 'list', 'watch']) => ({
    apiGroups,
    resources,
    verbs,
  });
  k.apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'older-role', namespace: ns } });
  k.apply({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'older-role', namespace: ns },
    rules: [
      rule(['stable.example.com'], ['machinemodels']),
      rule(['apps'], ['deployments']),
      rule([''], ['services']),
      rule(['autoscaling'], ['horizontalpodautoscalers']),
      rule([''], ['pods'], ['list']),
    ],
  });
  k.apply({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'older-role', namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'older-role' },
    subjects: [{ kind: 'ServiceAccount', name: 'older-role', namespace: ns }],
  });
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'mmo-older-role-')), 'kubeconfig');
  writeServiceAccountKubeconfig({
    kubectl: stack.binaries.kubectl,
    adminKubeconfig: stack.kubeconfig,
    namespace: ns,
    serviceAccount: 'older-role',
    file,
  });
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  const limited = new KubeClient(kc);
  const its = new Informer(kc, () => undefined, pino({ level: 'silent' }), { namespaces: [ns] });
  await its.start();
  try {
    limited.readFrom(its);
    expect(its.list('Pod', ns)).toBe('unknown');
    expect(its.lookup('MachineModel', ns, 'stuck')).toBeDefined();
    const before = { ...limited.reads };
    expect((await limited.listPods(ns, 'stuck')).map((p) => p.metadata?.name)).toEqual(['stuck-1']);
    expect(limited.reads).toEqual({ cache: before.cache, apiserver: before.apiserver + 1 });
  } finally {
    await its.stop();
  }
});
