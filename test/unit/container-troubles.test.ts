import { describe, expect, it } from 'vitest';
import {
  containerTroubles,
  describeTrouble,
  mountTrouble,
  podsWaitingForVolumes,
  troubleFingerprint,
  type ContainerStatusView,
  type PodHealthView,
} from '../../src/core/container-troubles.js';
import { readinessOf } from '../../src/core/readiness.js';
import { computeStatus } from '../../src/core/status.js';
import { readiness } from '../support/readiness.js';

const pod = (status: Partial<ContainerStatusView>, extra: Partial<PodHealthView> = {}): PodHealthView => ({
  metadata: { name: 'p' },
  spec: { containers: [{ name: 'model', resources: { limits: { memory: '64Mi' } } }] },
  status: { containerStatuses: [{ name: 'model', image: 'reg/m:v2', ready: false, restartCount: 0, ...status }] },
  ...extra,
});

const pullFailed = pod({
  state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "reg/m:v2": not found' } },
});
const oomLoop = pod({
  restartCount: 3,
  state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container' } },
  lastState: { terminated: { reason: 'OOMKilled', exitCode: 137 } },
});

describe('containerTroubles', () => {
  it('finds nothing wrong with ready or starting containers', () => {
    expect(containerTroubles([pod({ ready: true, state: { running: {} } })])).toBeUndefined();
    expect(containerTroubles([pod({ state: { waiting: { reason: 'ContainerCreating' } } })])).toBeUndefined();
    expect(containerTroubles([])).toBeUndefined();
  });

  it("reports an image that cannot be pulled with the runtime's message", () => {
    const t = containerTroubles([pullFailed, { ...pullFailed }]);
    expect(t).toMatchObject({ kind: 'image-pull', pods: 2, image: 'reg/m:v2', reason: 'ImagePullBackOff' });
    expect(describeTrouble(t!)).toBe(
      'image reg/m:v2 cannot be pulled (ImagePullBackOff, 2 pods): Back-off pulling image "reg/m:v2": not found',
    );
  });

  it('reports a crash loop by how the container last ended, naming the memory limit for OOMKilled', () => {
    const t = containerTroubles([oomLoop])!;
    expect(t).toMatchObject({ kind: 'crash-loop', restarts: 3, lastReason: 'OOMKilled', exitCode: 137 });
    expect(describeTrouble(t)).toBe(
      'container model keeps crashing (3 restarts, 1 pod): last killed for using more memory than its limit of 64Mi (OOMKilled)',
    );
    const exited = pod({ state: { terminated: { reason: 'Error', exitCode: 3, message: 'model file is corrupt\n' } } });
    expect(describeTrouble(containerTroubles([exited])!)).toBe(
      'container model keeps crashing (0 restarts, 1 pod): last ended with Error (exit code 3): model file is corrupt',
    );
  });

  it('keeps calling a restarted container crashing until it is ready again', () => {
    const restarted = {
      restartCount: 1,
      state: { running: {} },
      lastState: { terminated: { reason: 'Error', exitCode: 1 } },
    };
    expect(containerTroubles([pod(restarted)])?.kind).toBe('crash-loop');
    expect(containerTroubles([pod({ ...restarted, ready: true })])).toBeUndefined();
  });

  it('ranks an image pull over a crash, and a crash over a container that is only not ready', () => {
    const slow = pod({ state: { running: {} } });
    expect(containerTroubles([slow, oomLoop, pullFailed])?.kind).toBe('image-pull');
    expect(containerTroubles([slow, oomLoop])?.kind).toBe('crash-loop');
    expect(containerTroubles([slow])).toMatchObject({ kind: 'not-ready', pods: 1 });
  });

  it('ignores Pods on their way out', () => {
    expect(containerTroubles([{ ...pullFailed, metadata: { deletionTimestamp: 'now' } }])).toBeUndefined();
  });

  it('fingerprints what changes the verdict, not every restart', () => {
    const again = pod({ ...oomLoop.status!.containerStatuses![0]!, restartCount: 4 });
    expect(troubleFingerprint(again)).toBe(troubleFingerprint(oomLoop));
    expect(troubleFingerprint(pod({ ready: true, state: { running: {} } }))).toBe('');
  });
});

describe('status of a model whose containers cannot run', () => {
  const status = (containers: ReturnType<typeof containerTroubles>) =>
    computeStatus(undefined, {
      generation: 2,
      verdict: { kind: 'progressing' },
      readiness: { ...readiness(0), containers },
      now: 't',
    });
  const condition = (s: ReturnType<typeof status>, type: string) => s.conditions?.find((c) => c.type === type);

  it('is Failed and Stalled at once for an image that cannot be pulled or a crash loop', () => {
    for (const [trouble, reason] of [
      [containerTroubles([pullFailed]), 'ImagePullFailed'],
      [containerTroubles([oomLoop]), 'CrashLoopBackOff'],
    ] as const) {
      const s = status(trouble);
      expect(s.phase).toBe('Failed');
      expect(condition(s, 'Ready')).toMatchObject({ status: 'False', reason });
      expect(condition(s, 'Ready')?.message).toContain(describeTrouble(trouble!));
      expect(condition(s, 'Stalled')).toMatchObject({ status: 'True', reason });
      expect(condition(s, 'Reconciling')).toMatchObject({ status: 'False' });
    }
  });

  it('is still Deploying for a container that runs but is not ready yet, and says what the probe said', () => {
    const s = status({ kind: 'not-ready', pods: 1, container: 'model', probeMessage: 'Readiness probe failed: 503' });
    expect(s.phase).toBe('Deploying');
    expect(condition(s, 'Ready')).toMatchObject({ reason: 'ContainerNotReady' });
    expect(condition(s, 'Ready')?.message).toContain('running but not ready (1 pod): Readiness probe failed: 503');
    expect(condition(s, 'Reconciling')).toMatchObject({ status: 'True' });
  });

  it('recovers by itself once the containers run', () => {
    const failed = status(containerTroubles([pullFailed]));
    const fixed = computeStatus(failed, {
      generation: 3,
      verdict: { kind: 'ready' },
      readiness: readiness(2),
      now: 't2',
    });
    expect(fixed.phase).toBe('Ready');
    expect(condition(fixed, 'Stalled')).toMatchObject({ status: 'False' });
  });
});

describe("a model in storage whose volume the model cache's plugin cannot mount yet", () => {
  // The kubelet's FailedMount messages, as 1.36 writes them (operation_generator.go, csi_mounter.go).
  const failed = (suffix: string) => `MountVolume.SetUp failed for volume "model-cache" : ${suffix}`;
  const creating: PodHealthView = {
    metadata: { name: 'p' },
    spec: { containers: [{ name: 'model' }] },
    status: {
      containerStatuses: [{ name: 'model', ready: false, state: { waiting: { reason: 'ContainerCreating' } } }],
    },
  };
  const status = (containers: ReturnType<typeof containerTroubles>) =>
    computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'progressing' },
      readiness: { ...readiness(0), containers },
      now: 't',
    });
  const condition = (s: ReturnType<typeof status>, type: string) => s.conditions?.find((c) => c.type === type);

  it('finds the Pods whose containers wait for their volumes', () => {
    expect(podsWaitingForVolumes([creating, { ...creating, metadata: { deletionTimestamp: 't' } }])).toEqual([
      creating,
    ]);
    // Placed, and no container status yet: the kubelet mounts volumes first (seen: 35 s lost without it).
    const placed: PodHealthView = { status: { conditions: [{ type: 'PodScheduled', status: 'True' }] } };
    const unplaced: PodHealthView = { status: { conditions: [{ type: 'PodScheduled', status: 'False' }] } };
    expect(podsWaitingForVolumes([placed, unplaced])).toEqual([placed]);
    expect(containerTroubles([creating])).toBeUndefined();
  });

  it("is Failed and Stalled as ModelUnavailable, in the store's words, for a refused object", () => {
    const t = mountTrouble(
      failed('rpc error: code = NotFound desc = s3://models/x: 404 NoSuchKey: The specified key does not exist.'),
      1,
    );
    expect(t).toEqual({
      kind: 'model-unavailable',
      pods: 1,
      container: 'model-cache',
      message: 's3://models/x: 404 NoSuchKey: The specified key does not exist.',
    });
    const s = status(t);
    expect(s.phase).toBe('Failed');
    expect(condition(s, 'Ready')).toMatchObject({ status: 'False', reason: 'ModelUnavailable' });
    expect(condition(s, 'Stalled')).toMatchObject({ status: 'True', reason: 'ModelUnavailable' });
    for (const code of ['PermissionDenied', 'FailedPrecondition', 'InvalidArgument'])
      expect(mountTrouble(failed(`rpc error: code = ${code} desc = no`), 1)?.kind).toBe('model-unavailable');
  });

  it('is ModelUnavailable for a Secret the kubelet cannot find, in its words', () => {
    const t = mountTrouble(
      failed(
        'kubernetes.io/csi: failed to find the secret store in the namespace t1 with error: secrets "store" not found',
      ),
      2,
    );
    expect(t).toMatchObject({ kind: 'model-unavailable', pods: 2 });
    expect(describeTrouble(t!)).toContain('secrets "store" not found');
  });

  it('says CacheFull and QuotaExceeded as their own reasons, and both need a person', () => {
    const full = mountTrouble(
      failed(
        "rpc error: code = ResourceExhausted desc = CacheFull: s3://m/x: the node's model cache (1.0 MiB) cannot hold",
      ),
      1,
    );
    expect(full?.kind).toBe('cache-full');
    expect(condition(status(full), 'Ready')).toMatchObject({ reason: 'CacheFull' });
    const quota = mountTrouble(
      failed('rpc error: code = ResourceExhausted desc = QuotaExceeded: namespace t1 may hold 1.0 MiB'),
      1,
    );
    expect(quota).toMatchObject({ kind: 'quota-exceeded', message: 'namespace t1 may hold 1.0 MiB' });
    expect(status(quota).phase).toBe('Failed');
  });

  it('is Reconciling, not Failed, for a store that will be asked again (5xx, throttling, no plugin yet)', () => {
    const t = mountTrouble(failed('rpc error: code = Unavailable desc = s3://models/x: 503 SlowDown'), 1);
    expect(t).toEqual({
      kind: 'fetch-retrying',
      pods: 1,
      container: 'model-cache',
      message: 's3://models/x: 503 SlowDown',
    });
    const s = status(t);
    expect(s.phase).not.toBe('Failed');
    expect(condition(s, 'Reconciling')).toMatchObject({ status: 'True' });
    expect(
      mountTrouble(
        failed(
          'kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name model-cache.stable.example.com not found in the list of registered CSI drivers',
        ),
        1,
      )?.kind,
    ).toBe('fetch-retrying');
  });

  it("shows the plugin's progress while it fetches", () => {
    const t = mountTrouble(
      failed(
        "rpc error: code = Aborted desc = fetching s3://models/x into the node's cache: 64.0 MiB of 256.0 MiB, 16.0 MiB/s",
      ),
      1,
    );
    expect(t).toEqual({
      kind: 'fetching',
      pods: 1,
      container: 'model-cache',
      progress: '64.0 MiB of 256.0 MiB, 16.0 MiB/s',
    });
    expect(describeTrouble(t!)).toBe(
      "fetching the model into the node's cache (1 pod): 64.0 MiB of 256.0 MiB, 16.0 MiB/s",
    );
    expect(status(t).phase).not.toBe('Failed');
  });

  it("ignores another volume's mount failures", () => {
    expect(mountTrouble('MountVolume.SetUp failed for volume "config" : configmap "x" not found', 1)).toBeUndefined();
    expect(mountTrouble(undefined, 1)).toBeUndefined();
  });
});

describe('Pods the apiserver refuses to create', () => {
  it("is Failed with the apiserver's words from the Deployment's ReplicaFailure condition", () => {
    const r = readinessOf({
      spec: { replicas: 1 },
      status: {
        replicas: 0,
        conditions: [
          {
            type: 'ReplicaFailure',
            status: 'True',
            reason: 'FailedCreate',
            message:
              'pods "m-1" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false',
          },
        ],
      },
    });
    expect(r.containers).toMatchObject({ kind: 'pod-refused', pods: 1, reason: 'FailedCreate' });
    const s = computeStatus(undefined, { generation: 1, verdict: { kind: 'progressing' }, readiness: r, now: 't' });
    expect(s.phase).toBe('Failed');
    const ready = s.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'PodsRefused' });
    expect(ready?.message).toContain('violates PodSecurity');
  });
});
