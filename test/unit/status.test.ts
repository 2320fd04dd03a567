import { describe, expect, it } from 'vitest';
import { decideProgress } from '../../src/core/progress.js';
import { computeStatus, isReady, setCondition, statusDiffers } from '../../src/core/status.js';
import { readiness } from '../support/readiness.js';

describe('computeStatus', () => {
  it('reports Ready with conditions, replicas, URL and observed generation', () => {
    const s = computeStatus(undefined, {
      generation: 3,
      verdict: { kind: 'ready' },
      readiness: readiness(2),
      inferenceURL: 'http://m',
      now: 't1',
    });
    expect(s).toMatchObject({
      phase: 'Ready',
      replicas: 2,
      ready: '2/2',
      observedGeneration: 3,
      inferenceURL: 'http://m',
    });
    expect(s.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'ModelReady',
      lastTransitionTime: 't1',
    });
    expect(s.conditions?.find((c) => c.type === 'Available')).toMatchObject({ status: 'True' });
  });

  it('keeps lastTransitionTime while a condition keeps its status', () => {
    const first = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'progressing' },
      readiness: readiness(0),
      now: 't1',
    });
    const second = computeStatus(first, {
      generation: 1,
      verdict: { kind: 'progressing' },
      readiness: readiness(1),
      now: 't2',
    });
    expect(second.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime).toBe('t1');
    const third = computeStatus(second, {
      generation: 1,
      verdict: { kind: 'ready' },
      readiness: readiness(2),
      now: 't3',
    });
    expect(third.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime).toBe('t3');
  });

  it('says why it failed', () => {
    const s = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'deadline-exceeded', deadlineSeconds: 600 },
      readiness: readiness(0),
      now: 't',
    });
    expect(s.phase).toBe('Failed');
    expect(s.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ reason: 'ProgressDeadlineExceeded' });
    const f = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'failed', reason: 'InvalidSpec', message: 'spec.image is required' },
      now: 't',
    });
    expect(f.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'InvalidSpec',
      message: 'spec.image is required',
    });
    expect(f.conditions?.find((c) => c.type === 'Available')).toMatchObject({
      status: 'Unknown',
      reason: 'DeploymentNotFound',
    });
  });

  it("reports a rollout the scheduler cannot place as Pending, with the scheduler's reason", () => {
    const unschedulable = { pods: 2, message: '0/1 nodes are available: 1 Insufficient nvidia.com/gpu.' };
    const s = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'progressing' },
      readiness: { ...readiness(0), unschedulable },
      now: 't',
    });
    expect(s.phase).toBe('Pending');
    expect(s.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'Unschedulable',
      message: expect.stringContaining(
        '2 pods cannot be scheduled: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.',
      ),
    });
    // Past the progress deadline it is Failed, and the message still names the cause.
    const late = computeStatus(s, {
      generation: 1,
      verdict: { kind: 'deadline-exceeded', deadlineSeconds: 600 },
      readiness: { ...readiness(0), unschedulable },
      now: 't2',
    });
    expect(late.phase).toBe('Failed');
    expect(late.conditions?.find((c) => c.type === 'Ready')?.message).toContain('Insufficient nvidia.com/gpu');
    // Scheduled again: back to Deploying.
    expect(
      computeStatus(s, { generation: 1, verdict: { kind: 'progressing' }, readiness: readiness(1), now: 't3' }).phase,
    ).toBe('Deploying');
  });

  it('says whether the autoscaler can act, and drops that condition once there is no autoscaler', () => {
    const blind = {
      scalingActive: {
        status: 'False' as const,
        reason: 'FailedGetResourceMetric',
        message: 'unable to get metrics for resource cpu',
      },
    };
    const s = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'ready' },
      readiness: { ...readiness(2), autoscaler: blind },
      now: 't',
    });
    expect(s.phase).toBe('Ready');
    expect(s.conditions?.find((c) => c.type === 'Autoscaling')).toMatchObject({
      status: 'False',
      reason: 'FailedGetResourceMetric',
      message: 'the autoscaler cannot scale: unable to get metrics for resource cpu',
    });
    const fresh = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'ready' },
      readiness: { ...readiness(2), autoscaler: {} },
      now: 't',
    });
    expect(fresh.conditions?.find((c) => c.type === 'Autoscaling')).toMatchObject({
      status: 'Unknown',
      reason: 'NotReported',
    });
    const fixed = computeStatus(s, { generation: 2, verdict: { kind: 'ready' }, readiness: readiness(2), now: 't2' });
    expect(fixed.conditions?.map((c) => c.type)).not.toContain('Autoscaling');
    // A failure before anything was observed says nothing about the autoscaler, so its condition stays.
    const failed = computeStatus(s, {
      generation: 2,
      verdict: { kind: 'failed', reason: 'Forbidden', message: 'x' },
      now: 't3',
    });
    expect(failed.conditions?.map((c) => c.type)).toContain('Autoscaling');
  });

  it('says Reconciling while work is under way and Stalled when it needs a person (API conventions, kstatus)', () => {
    const pair = (verdict: Parameters<typeof computeStatus>[1]['verdict'], ready = 0) => {
      const conditions = computeStatus(undefined, {
        generation: 1,
        verdict,
        readiness: readiness(ready),
        now: 't',
      }).conditions;
      const of = (type: string) => conditions?.find((c) => c.type === type);
      return [of('Reconciling')?.status, of('Stalled')?.status, of('Stalled')?.reason];
    };
    expect(pair({ kind: 'ready' }, 2)).toEqual(['False', 'False', 'ModelReady']);
    expect(pair({ kind: 'progressing' })).toEqual(['True', 'False', 'Progressing']);
    expect(pair({ kind: 'deleting', message: 'x' })).toEqual(['True', 'False', 'Deleting']);
    expect(pair({ kind: 'failed', reason: 'NotOwned', message: 'taken' })).toEqual(['False', 'True', 'NotOwned']);
    expect(pair({ kind: 'deadline-exceeded', deadlineSeconds: 600 })).toEqual([
      'False',
      'True',
      'ProgressDeadlineExceeded',
    ]);
  });

  it('reports a canary rollout: status.rollout, Progressing, Reconciling while it runs, Stalled after a rollback', () => {
    const rollout = {
      workflowId: 'machinemodel/ml/m/rollout/abcd1234',
      phase: 'Progressing' as const,
      stable: { image: 'reg/m:v1', modelPath: '/m' },
      canary: { image: 'reg/m:v2', modelPath: '/m' },
      step: 1,
      steps: 2,
      weight: 10,
    };
    const running = computeStatus(undefined, {
      generation: 2,
      verdict: { kind: 'ready' },
      readiness: readiness(2),
      rollout,
      now: 't1',
    });
    const of = (s: typeof running, type: string) => s.conditions?.find((c) => c.type === type);
    expect(running.phase).toBe('Ready');
    expect(running.rollout).toEqual(rollout);
    expect(of(running, 'Progressing')).toMatchObject({
      status: 'True',
      reason: 'RolloutProgressing',
      message: 'rollout of reg/m:v2 (/m): Progressing, step 1 of 2, canary 10%',
    });
    expect(of(running, 'Reconciling')).toMatchObject({ status: 'True', reason: 'RolloutInProgress' });
    expect(of(running, 'Stalled')?.status).toBe('False');
    // A later round that says nothing of the rollout keeps what status says.
    expect(
      computeStatus(running, { generation: 2, verdict: { kind: 'ready' }, readiness: readiness(2), now: 't2' }).rollout,
    ).toEqual(rollout);

    const rolledBack = computeStatus(running, {
      generation: 2,
      verdict: {
        kind: 'failed',
        reason: 'RolloutFailed',
        message: 'the rollout of reg/m:v2 (/m) ended RolledBack: ...',
      },
      readiness: readiness(2),
      rollout: { ...rollout, phase: 'RolledBack', weight: 0, message: 'rolled back at step 1 (10%): canary not ready' },
      now: 't3',
    });
    expect(rolledBack.phase).toBe('Failed');
    expect(of(rolledBack, 'Progressing')).toMatchObject({ status: 'False', reason: 'RolloutRolledBack' });
    expect(of(rolledBack, 'Stalled')).toMatchObject({ status: 'True', reason: 'RolloutFailed' });
    expect(statusDiffers(running, rolledBack)).toBe(true);
  });

  it('detects when nothing would change', () => {
    const a = computeStatus(undefined, {
      generation: 1,
      verdict: { kind: 'ready' },
      readiness: readiness(2),
      now: 't1',
    });
    const b = computeStatus(a, { generation: 1, verdict: { kind: 'ready' }, readiness: readiness(2), now: 't2' });
    expect(statusDiffers(a, b)).toBe(false);
    expect(
      statusDiffers(
        a,
        computeStatus(a, { generation: 2, verdict: { kind: 'ready' }, readiness: readiness(2), now: 't2' }),
      ),
    ).toBe(true);
  });

  it('adds conditions in order and replaces by type', () => {
    const c = setCondition([], { type: 'A', status: 'True', reason: 'r', message: '' }, 't1');
    expect(setCondition(c, { type: 'A', status: 'False', reason: 'r2', message: '' }, 't2')).toEqual([
      { type: 'A', status: 'False', reason: 'r2', message: '', lastTransitionTime: 't2' },
    ]);
  });
});

describe('isReady', () => {
  it('needs the latest spec observed, all replicas updated and ready, and Available', () => {
    expect(isReady(readiness(2))).toBe(true);
    expect(isReady(readiness(1))).toBe(false);
    expect(isReady({ ...readiness(2), observedLatest: false })).toBe(false);
    expect(isReady({ ...readiness(2), updatedReplicas: 1 })).toBe(false);
    expect(isReady(undefined)).toBe(false);
  });
});

describe('decideProgress', () => {
  const cfg = {
    progressDeadlineSeconds: 600,
    driftCheckSeconds: 600,
    readinessRecheckSeconds: { initial: 2, max: 60 },
  };

  it('backs off while progressing, never past the deadline', () => {
    let s = { notReadyChecks: 0 } as { progressStartedAt?: number; notReadyChecks: number };
    const waits: number[] = [];
    for (let t = 0; t < 5; t++) {
      const d = decideProgress(s, false, 1000 * t, cfg);
      waits.push(d.nextCheckSeconds);
      s = d;
    }
    expect(waits).toEqual([2, 4, 8, 16, 32]);
    expect(decideProgress({ progressStartedAt: 0, notReadyChecks: 9 }, false, 595_000, cfg).nextCheckSeconds).toBe(5);
  });

  it('fails past the deadline and recovers when ready', () => {
    const late = decideProgress({ progressStartedAt: 0, notReadyChecks: 3 }, false, 600_000, cfg);
    expect(late.verdict).toEqual({ kind: 'deadline-exceeded', deadlineSeconds: 600 });
    const ok = decideProgress(late, true, 700_000, cfg);
    expect(ok).toMatchObject({ verdict: { kind: 'ready' }, notReadyChecks: 0, nextCheckSeconds: 600 });
    expect(ok.progressStartedAt).toBeUndefined();
  });
});
