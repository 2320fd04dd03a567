import { describe, expect, it } from 'vitest';
import {
  containerTroubles,
  describeTrouble,
  fetchProgressOf,
  troubleFingerprint,
  type ContainerStatusView,
  type PodHealthView,
} from '../../src/core/container-troubles.js';
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

describe('the fetch-model init container of a model in storage', () => {
  const modelWaiting = {
    name: 'model',
    ready: false,
    restartCount: 0,
    state: { waiting: { reason: 'PodInitializing' } },
  };
  const fetchPod = (fetch: Partial<ContainerStatusView>): PodHealthView => ({
    metadata: { name: 'p' },
    spec: { containers: [{ name: 'model' }] },
    status: {
      initContainerStatuses: [{ name: 'fetch-model', ready: false, restartCount: 0, ...fetch }],
      containerStatuses: [modelWaiting],
    },
  });
  const status = (containers: ReturnType<typeof containerTroubles>) =>
    computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'progressing' },
      readiness: { ...readiness(0), containers },
      now: 't',
    });
  const condition = (s: ReturnType<typeof status>, type: string) => s.conditions?.find((c) => c.type === type);

  it("is Failed and Stalled as ModelUnavailable, in the store's words, for a refused fetch", () => {
    const refused = fetchPod({
      restartCount: 1,
      state: { waiting: { reason: 'CrashLoopBackOff' } },
      lastState: { terminated: { reason: 'Error', exitCode: 1, message: 's3://models/x: 404 NoSuchKey: not found' } },
    });
    const t = containerTroubles([refused]);
    expect(t).toEqual({
      kind: 'model-unavailable',
      pods: 1,
      container: 'fetch-model',
      message: 's3://models/x: 404 NoSuchKey: not found',
    });
    const s = status(t);
    expect(s.phase).toBe('Failed');
    expect(condition(s, 'Ready')).toMatchObject({ status: 'False', reason: 'ModelUnavailable' });
    expect(condition(s, 'Ready')?.message).toContain('404 NoSuchKey');
    expect(condition(s, 'Stalled')).toMatchObject({ status: 'True', reason: 'ModelUnavailable' });
  });

  it('is ModelUnavailable for a missing Secret (the kubelet cannot start the fetcher)', () => {
    const t = containerTroubles([
      fetchPod({ state: { waiting: { reason: 'CreateContainerConfigError', message: 'secret "store" not found' } } }),
    ]);
    expect(t).toMatchObject({ kind: 'model-unavailable', message: 'secret "store" not found' });
  });

  it('is Reconciling, not Failed, with the attempt and the last error, for a fetch that will be retried', () => {
    const t = containerTroubles([
      fetchPod({
        restartCount: 2,
        state: { waiting: { reason: 'CrashLoopBackOff' } },
        lastState: { terminated: { reason: 'Error', exitCode: 75, message: 's3://models/x: 503 SlowDown' } },
      }),
    ]);
    expect(t).toEqual({
      kind: 'fetch-retrying',
      pods: 1,
      container: 'fetch-model',
      attempt: 3,
      message: 's3://models/x: 503 SlowDown',
    });
    const s = status(t);
    expect(s.phase).not.toBe('Failed');
    expect(condition(s, 'Stalled')?.status).not.toBe('True');
    expect(condition(s, 'Reconciling')).toMatchObject({ status: 'True' });
    expect(describeTrouble(t!)).toContain('attempt 3');
  });

  it('says the model is being fetched while a fetcher runs again after a refusal (the kubelet retried it)', () => {
    const t = containerTroubles([
      fetchPod({
        restartCount: 1,
        state: { running: { startedAt: 't' } },
        lastState: { terminated: { reason: 'Error', exitCode: 1, message: 's3://models/x: 403 AccessDenied' } },
      }),
    ]);
    expect(t).toEqual({ kind: 'fetching', pods: 1, container: 'fetch-model' });
  });

  it('says the model is being fetched while the fetcher runs', () => {
    const t = containerTroubles([fetchPod({ state: { running: { startedAt: 't' } } })]);
    expect(t).toEqual({ kind: 'fetching', pods: 1, container: 'fetch-model' });
    expect(status(t).phase).not.toBe('Failed');
  });

  it("shows the fetcher's progress, and takes only numbers from its answer (a tenant's Pod)", () => {
    const progress = fetchProgressOf({ bytes: 64 * 2 ** 20, total: 256 * 2 ** 20, rate: 16 * 2 ** 20, extra: 'x' });
    expect(progress).toEqual({ bytes: 64 * 2 ** 20, total: 256 * 2 ** 20, rate: 16 * 2 ** 20 });
    expect(describeTrouble({ kind: 'fetching', pods: 1, container: 'fetch-model', progress })).toBe(
      "fetching the model into the node's cache (1 pod): 64.0 MiB of 256.0 MiB, 16.0 MiB/s",
    );
    expect(fetchProgressOf({ bytes: '1e9', rate: 1 })).toBeUndefined();
    expect(fetchProgressOf({ bytes: -1, rate: 1 })).toBeUndefined();
    expect(fetchProgressOf('<script>')).toBeUndefined();
    expect(fetchProgressOf({ bytes: 1, rate: 2, total: 'lots' })).toEqual({ bytes: 1, rate: 2 });
  });
});
