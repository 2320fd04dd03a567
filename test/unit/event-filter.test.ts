import { describe, expect, it } from 'vitest';
import { ChangeFilter, modelKeyOf, type WatchedObject } from '../../src/informer/event-filter.js';

const model = (over: Partial<NonNullable<WatchedObject['metadata']>> = {}, status?: object): WatchedObject => ({
  metadata: { name: 'm', namespace: 'ns', uid: 'u1', generation: 1, resourceVersion: '1', finalizers: [], ...over },
  spec: { image: 'x' },
  status: status as WatchedObject['status'],
});

const deployment = (
  status: NonNullable<WatchedObject['status']>,
  over: Partial<NonNullable<WatchedObject['metadata']>> = {},
): WatchedObject => ({
  metadata: {
    name: 'm',
    namespace: 'ns',
    uid: 'd1',
    generation: 1,
    labels: { 'app.kubernetes.io/instance': 'm' },
    ownerReferences: [
      { apiVersion: 'stable.example.com/v1', kind: 'MachineModel', name: 'm', uid: 'u1', controller: true },
    ],
    ...over,
  },
  status,
});

describe('ChangeFilter', () => {
  it('signals a new MachineModel and ignores its own status writes, labels and annotations', () => {
    const f = new ChangeFilter();
    expect(f.observe('MachineModel', 'added', model())).toMatchObject({
      namespace: 'ns',
      name: 'm',
      signal: 'reconcile',
    });
    expect(f.observe('MachineModel', 'updated', model({ resourceVersion: '2' }, { phase: 'Ready' }))).toBeUndefined();
    expect(
      f.observe(
        'MachineModel',
        'updated',
        model({ resourceVersion: '3', labels: { a: 'b' }, annotations: { x: 'y' } }),
      ),
    ).toBeUndefined();
  });

  it('signals spec changes, deletion, finalizer changes and the resync annotation', () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    expect(f.observe('MachineModel', 'updated', model({ generation: 2 }))).toBeDefined();
    expect(
      f.observe('MachineModel', 'updated', model({ generation: 2, deletionTimestamp: '2026-01-01T00:00:00Z' })),
    ).toBeDefined();
    expect(
      f.observe(
        'MachineModel',
        'updated',
        model({ generation: 2, deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: ['x'] }),
      ),
    ).toBeDefined();
    expect(
      f.observe(
        'MachineModel',
        'updated',
        model({
          generation: 2,
          deletionTimestamp: '2026-01-01T00:00:00Z',
          finalizers: ['x'],
          annotations: { 'stable.example.com/resync': 'now' },
        }),
      ),
    ).toBeDefined();
    expect(f.observe('MachineModel', 'deleted', model())).toMatchObject({ signal: 'deleted', uid: 'u1' });
  });

  it('maps a child to its owner and signals readiness changes and drift, not status noise', () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    const s = { observedGeneration: 1, replicas: 2, readyReplicas: 1, updatedReplicas: 2, availableReplicas: 1 };
    f.observe('Deployment', 'added', deployment({}));
    expect(f.observe('Deployment', 'updated', deployment(s))).toMatchObject({
      name: 'm',
      signal: 'reconcile',
      hint: { source: 'Deployment' },
    });
    expect(f.observe('Deployment', 'updated', deployment(s, { resourceVersion: '9' }))).toBeUndefined();
    expect(f.observe('Deployment', 'updated', deployment({ ...s, readyReplicas: 2 }))).toBeDefined();
    expect(f.observe('Deployment', 'updated', deployment({ ...s, readyReplicas: 2 }, { generation: 2 }))).toBeDefined();
    expect(f.observe('Deployment', 'deleted', deployment(s))).toMatchObject({ signal: 'reconcile' });
  });

  it("wakes nobody for a Deployment's Progressing condition alone: no round reads it", () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    f.observe('Deployment', 'added', deployment({}));
    // The Deployment controller's first update of a new Deployment: its revision and Progressing.
    const progressing = { type: 'Progressing', status: 'True', reason: 'NewReplicaSetCreated' };
    expect(f.observe('Deployment', 'updated', deployment({ conditions: [progressing] }))).toBeUndefined();
    // Its first status does: the rollout observed, not yet available.
    const unavailable = { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable' };
    const observed = { observedGeneration: 1, conditions: [progressing, unavailable] };
    expect(f.observe('Deployment', 'updated', deployment(observed))).toBeDefined();
    const stalled = { ...progressing, status: 'False', reason: 'ProgressDeadlineExceeded' };
    expect(
      f.observe('Deployment', 'updated', deployment({ ...observed, conditions: [stalled, unavailable] })),
    ).toBeUndefined();
  });

  it('wakes nobody for the children of a model that does not exist (garbage collection after deletion)', () => {
    const f = new ChangeFilter();
    const s = { observedGeneration: 1, replicas: 1, readyReplicas: 1, updatedReplicas: 1, availableReplicas: 1 };
    // Seen before the model's first listing: its own event will signal, so nothing is lost.
    expect(f.observe('Deployment', 'added', deployment(s))).toBeUndefined();
    expect(f.observe('MachineModel', 'added', model())).toBeDefined();
    expect(f.observe('Deployment', 'updated', deployment({ ...s, readyReplicas: 0 }))).toBeDefined();
    expect(f.observe('MachineModel', 'deleted', model())).toMatchObject({ signal: 'deleted' });
    expect(
      f.observe('Deployment', 'updated', deployment({ ...s, readyReplicas: 0 }, { deletionTimestamp: 'now' })),
    ).toBeUndefined();
    expect(f.observe('Deployment', 'deleted', deployment(s))).toBeUndefined();
    // A new object of the same name: its children matter again.
    f.observe('MachineModel', 'added', model({ uid: 'u2' }));
    f.observe('Deployment', 'added', deployment({}, { uid: 'd2' }));
    expect(f.observe('Deployment', 'updated', deployment(s, { uid: 'd2' }))).toBeDefined();
  });

  it("wakes nobody when a model's child is created: only the model's round creates one, and it knows", () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    const service: WatchedObject = { ...deployment({}), spec: { ports: [{ port: 80 }] } };
    expect(f.observe('Deployment', 'added', deployment({}))).toBeUndefined();
    expect(f.observe('Service', 'added', service)).toBeUndefined();
    expect(f.observe('HorizontalPodAutoscaler', 'added', deployment({}))).toBeUndefined();
    // What happens to it afterwards does wake the model: the Deployment controller's first status, drift.
    expect(f.observe('Deployment', 'updated', deployment({ observedGeneration: 1, replicas: 1 }))).toBeDefined();
    expect(f.observe('Service', 'updated', { ...service, spec: { ports: [{ port: 81 }] } })).toBeDefined();
    // A look-alike the operator does not control (someone else's Deployment of the model's name) does.
    const foreign = deployment({}, { name: 'm', uid: 'd9', ownerReferences: [] });
    expect(f.observe('Deployment', 'added', foreign)).toMatchObject({ name: 'm', signal: 'reconcile' });
  });

  it('signals when the autoscaler starts or stops being able to scale, not on its status refreshes', () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    const hpa = (active: string, currentReplicas: number): WatchedObject => ({
      ...deployment({}),
      spec: { minReplicas: 2, maxReplicas: 5 },
      status: { conditions: [{ type: 'ScalingActive', status: active }], replicas: currentReplicas },
    });
    f.observe('HorizontalPodAutoscaler', 'added', hpa('True', 2));
    expect(f.observe('HorizontalPodAutoscaler', 'updated', hpa('False', 2))).toBeDefined();
    expect(f.observe('HorizontalPodAutoscaler', 'updated', hpa('False', 3))).toBeUndefined();
    expect(f.observe('HorizontalPodAutoscaler', 'updated', hpa('True', 3))).toBeDefined();
  });

  it("wakes a model only when whether the scheduler can place one of its Pods changes, not on a Pod's progress", () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    const pod = (name: string, scheduled: { status: string; reason?: string; message?: string }): WatchedObject => ({
      metadata: {
        name,
        namespace: 'ns',
        uid: `uid-${name}`,
        labels: { 'app.kubernetes.io/instance': 'm' },
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'm-1', uid: 'rs', controller: true }],
      },
      status: { conditions: [{ type: 'PodScheduled', ...scheduled }] },
    });
    const placed = { status: 'True' };
    const stuck = (message: string) => ({ status: 'False', reason: 'Unschedulable', message });
    // A healthy Pod's life shows in its Deployment's status: no signal of its own.
    expect(f.observe('Pod', 'added', pod('p1', { status: 'False' }))).toBeUndefined();
    expect(f.observe('Pod', 'updated', pod('p1', placed))).toBeUndefined();
    expect(f.observe('Pod', 'deleted', pod('p1', placed))).toBeUndefined();
    // No node fits: the model hears of it, once per message.
    expect(f.observe('Pod', 'added', pod('p2', stuck('0/1 nodes: Insufficient gpu')))).toMatchObject({
      namespace: 'ns',
      name: 'm',
      signal: 'reconcile',
      hint: { source: 'Pod', event: 'added' },
    });
    expect(f.observe('Pod', 'updated', pod('p2', stuck('0/1 nodes: Insufficient gpu')))).toBeUndefined();
    expect(f.observe('Pod', 'updated', pod('p2', stuck('0/2 nodes: Insufficient gpu')))).toBeDefined();
    // Placed after all, or gone while stuck: the Pending reason must be cleared.
    expect(f.observe('Pod', 'updated', pod('p2', placed))).toBeDefined();
    expect(f.observe('Pod', 'added', pod('p3', stuck('no')))).toBeDefined();
    expect(f.observe('Pod', 'deleted', pod('p3', stuck('no')))).toBeDefined();
    // The Pods of an unknown model wake nobody.
    expect(
      f.observe('Pod', 'added', {
        ...pod('p4', stuck('no')),
        metadata: { ...pod('p4', stuck('no')).metadata, labels: { 'app.kubernetes.io/instance': 'other' } },
      }),
    ).toBeUndefined();
  });

  it("wakes a model when the kubelet's readiness probe of one of its Pods fails anew, once per message", () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    const probe = (name: string, message: string, resourceVersion = '7') => ({
      metadata: { name, namespace: 'ns', resourceVersion },
      involvedObject: { kind: 'Pod', name: 'm-abc' },
      reason: 'Unhealthy',
      message,
    });
    const owner = { namespace: 'ns', name: 'm' };
    const refused = probe('m-abc.1', 'Readiness probe failed: connection refused');
    expect(f.observeProbe('added', refused, owner)).toMatchObject({
      namespace: 'ns',
      name: 'm',
      signal: 'reconcile',
      hint: { source: 'Event', event: 'added', resourceVersion: '7' },
    });
    // The kubelet repeats a failure by counting it on the same Event: nothing new to say.
    expect(
      f.observeProbe('updated', { ...refused, metadata: { ...refused.metadata, resourceVersion: '8' } }, owner),
    ).toBeUndefined();
    // Another message is another Event.
    expect(
      f.observeProbe(
        'added',
        probe('m-abc.2', 'Readiness probe failed: HTTP probe failed with statuscode: 503'),
        owner,
      ),
    ).toBeDefined();
    // Liveness failures restart the container (the Pod says so); events that expire wake nobody.
    expect(f.observeProbe('added', probe('m-abc.3', 'Liveness probe failed: timeout'), owner)).toBeUndefined();
    expect(f.observeProbe('deleted', refused, owner)).toBeUndefined();
    // A Pod that is not a model's (not in the Pod cache), or a model that does not exist, wakes nobody.
    expect(f.observeProbe('added', probe('x.1', 'Readiness probe failed: no'), undefined)).toBeUndefined();
    expect(
      f.observeProbe('added', probe('x.2', 'Readiness probe failed: no'), { namespace: 'ns', name: 'gone' }),
    ).toBeUndefined();
  });

  it('wakes a model when the kubelet cannot mount its model cache volume, but not for another volume', () => {
    const f = new ChangeFilter();
    f.observe('MachineModel', 'added', model());
    const owner = { namespace: 'ns', name: 'm' };
    const failed = (name: string, message: string) => ({
      metadata: { name, namespace: 'ns', resourceVersion: '9' },
      involvedObject: { kind: 'Pod', name: 'm-abc' },
      reason: 'FailedMount',
      message,
    });
    expect(
      f.observeProbe(
        'added',
        failed('m-abc.m1', 'MountVolume.SetUp failed for volume "model-cache" : rpc error: code = NotFound desc = 404'),
        owner,
      ),
    ).toMatchObject({ name: 'm', signal: 'reconcile' });
    expect(
      f.observeProbe('added', failed('m-abc.m2', 'MountVolume.SetUp failed for volume "config" : not found'), owner),
    ).toBeUndefined();
  });

  it('finds the owning model from the controller reference, else the instance label', () => {
    expect(modelKeyOf('Service', deployment({}))).toEqual({ namespace: 'ns', name: 'm' });
    expect(
      modelKeyOf('Service', { metadata: { namespace: 'ns', labels: { 'app.kubernetes.io/instance': 'x' } } }),
    ).toEqual({ namespace: 'ns', name: 'x' });
    expect(modelKeyOf('Service', { metadata: { namespace: 'ns' } })).toBeUndefined();
  });
});
