import { describe, expect, it } from 'vitest';
import {
  canaryCeiling,
  canaryRequestRefusal,
  canaryReplicas,
  deployedRevision,
  durationSeconds,
  addTraffic,
  judgeCanary,
  revisionName,
  revisionOf,
  sameRevision,
  stableRevisionFor,
  validateRollout,
} from '../../src/core/rollout.js';
import type { RolloutSpec } from '../../src/core/api.js';

const plan: RolloutSpec = {
  strategy: 'Canary',
  steps: [
    { weight: 10, pause: '5m' },
    { weight: 50, pause: '1h30m' },
  ],
  analysis: { maxErrorRatePercent: 5, minRequests: 20 },
  onFailure: 'Rollback',
};

describe('a revision', () => {
  it('is the image and the model path: other fields do not make a new version', () => {
    const a = revisionOf({ image: 'reg/m:v1', modelPath: '/m' });
    expect(sameRevision(a, { image: 'reg/m:v1', modelPath: '/m' })).toBe(true);
    expect(sameRevision(a, { image: 'reg/m:v2', modelPath: '/m' })).toBe(false);
    expect(sameRevision(a, { image: 'reg/m:v1', modelPath: '/n' })).toBe(false);
  });

  it('has a short stable name that differs between revisions', () => {
    const name = revisionName({ image: 'reg/m:v1', modelPath: '/m' });
    expect(name).toMatch(/^[0-9a-f]{8}$/);
    expect(revisionName({ image: 'reg/m:v1', modelPath: '/m' })).toBe(name);
    expect(revisionName({ image: 'reg/m:v2', modelPath: '/m' })).not.toBe(name);
    // The separator keeps "a" + "b/c" apart from "a/b" + "c".
    expect(revisionName({ image: 'a', modelPath: 'b/c' })).not.toBe(revisionName({ image: 'a/b', modelPath: 'c' }));
  });
});

describe('the stable revision', () => {
  const v1 = { image: 'reg/m:v1', modelPath: '/m' };
  const v2 = { image: 'reg/m:v2', modelPath: '/m' };
  const withRollout = { ...v2, rollout: plan };

  it("is the spec's without a rollout, or without a Deployment yet", () => {
    expect(stableRevisionFor(v2, v1, undefined)).toEqual(v2);
    expect(stableRevisionFor(withRollout, undefined, undefined)).toEqual(v2);
  });

  it("stays the deployed one with a rollout, until the spec's is promoted", () => {
    expect(stableRevisionFor(withRollout, v1, undefined)).toEqual(v1);
    expect(stableRevisionFor(withRollout, v1, { image: 'reg/m:v3', modelPath: '/m' })).toEqual(v1);
    expect(stableRevisionFor(withRollout, v1, v2)).toEqual(v2);
    expect(stableRevisionFor(withRollout, v2, undefined)).toEqual(v2);
  });

  it('is read from a Deployment as the image and MODEL_PATH of its container', () => {
    const d = {
      spec: { template: { spec: { containers: [{ image: 'reg/m:v1', env: [{ name: 'MODEL_PATH', value: '/m' }] }] } } },
    };
    expect(deployedRevision(d)).toEqual(v1);
    expect(deployedRevision({})).toBeUndefined();
  });
});

describe('a rollout plan', () => {
  it('reads durations as Kubernetes users write them', () => {
    expect(durationSeconds('30s')).toBe(30);
    expect(durationSeconds('5m')).toBe(300);
    expect(durationSeconds('1h30m')).toBe(5400);
    expect(durationSeconds('')).toBeUndefined();
    expect(durationSeconds('5 minutes')).toBeUndefined();
    expect(durationSeconds('-5m')).toBeUndefined();
  });

  it('accepts a valid plan, and names every mistake in one pass', () => {
    expect(validateRollout(plan, 'classifier')).toEqual([]);
    expect(validateRollout(undefined, 'x'.repeat(63))).toEqual([]);
    expect(
      validateRollout(
        {
          strategy: 'BlueGreen' as 'Canary',
          steps: [{ weight: 50 }, { weight: 50, pause: 'soon' }, { weight: 100, pause: '25h' }],
          analysis: { maxErrorRatePercent: 120, minRequests: -1 },
          onFailure: 'Retry' as 'Pause',
        },
        'classifier',
      ),
    ).toEqual([
      'rollout.strategy must be Canary, got "BlueGreen"',
      'rollout.steps[1].weight must be greater than the step before it (50)',
      'rollout.steps[1].pause must be a duration such as 30s, 5m or 1h30m, at most 24h, got "soon"',
      'rollout.steps[2].weight must be a whole percent from 1 to 99, got 100',
      'rollout.steps[2].pause must be a duration such as 30s, 5m or 1h30m, at most 24h, got "25h"',
      'rollout.analysis.maxErrorRatePercent must be from 0 to 100, got 120',
      'rollout.analysis.minRequests must be a whole number of at least 0, got -1',
      'rollout.onFailure must be Rollback or Pause, got "Retry"',
    ]);
    expect(validateRollout({ strategy: 'Canary', steps: [] }, 'classifier')).toEqual([
      'rollout.steps must have 1 to 10 steps, got 0',
    ]);
    expect(validateRollout({ strategy: 'Canary', steps: [{ weight: 10 }] }, 'm'.repeat(57))).toEqual([
      "metadata.name must be at most 56 characters for a rollout (its canary's Service is named <name>-canary), got 57",
    ]);
  });

  it("sizes the canary as its weight's share of the stable replicas, at least one", () => {
    expect(canaryReplicas(4, 10)).toBe(1);
    expect(canaryReplicas(4, 50)).toBe(2);
    expect(canaryReplicas(5, 50)).toBe(3);
    expect(canaryReplicas(1, 1)).toBe(1);
  });
});

describe('the verdict on a canary', () => {
  const ready = { readyReplicas: 1, desiredReplicas: 1 };

  it('fails at once on a trouble that needs a person, whatever the step', () => {
    const verdict = judgeCanary(
      plan.analysis,
      {
        readyReplicas: 0,
        desiredReplicas: 1,
        trouble: { kind: 'crash-loop', pods: 1, container: 'model', restarts: 3, lastReason: 'Error', exitCode: 3 },
      },
      false,
    );
    expect(verdict).toEqual({
      kind: 'failed',
      check: 'Ready',
      message:
        'canary not ready: container model keeps crashing (3 restarts, 1 pod): last ended with Error (exit code 3)',
    });
  });

  it('waits for a canary that is still loading', () => {
    expect(
      judgeCanary(
        plan.analysis,
        { readyReplicas: 0, desiredReplicas: 1, trouble: { kind: 'not-ready', pods: 1, container: 'model' } },
        true,
      ),
    ).toEqual({ kind: 'waiting', detail: 'canary 0 of 1 ready: container model is running but not ready (1 pod)' });
  });

  it('judges the error rate over the step, with the numbers: during it once enough requests came, and at its end', () => {
    // During the step: too few requests yet is no verdict; enough, and a breach fails at once.
    expect(judgeCanary(plan.analysis, { ...ready, traffic: { requests: 3, errors: 3 } }, false).kind).toBe('healthy');
    expect(judgeCanary(plan.analysis, { ...ready, traffic: { requests: 100, errors: 9 } }, false)).toMatchObject({
      kind: 'failed',
      check: 'ErrorRate',
    });
    expect(judgeCanary(plan.analysis, { ...ready, traffic: { requests: 100, errors: 5 } }, false).kind).toBe('healthy');
    expect(judgeCanary(plan.analysis, { ...ready, traffic: { requests: 100, errors: 9 } }, true)).toEqual({
      kind: 'failed',
      check: 'ErrorRate',
      message: 'canary error rate too high: 9 of 100 requests answered 5xx (9%, at most 5%)',
    });
    expect(judgeCanary(plan.analysis, { ...ready, traffic: { requests: 100, errors: 5 } }, true)).toEqual({
      kind: 'healthy',
      detail: 'canary 1 of 1 ready; 5 of 100 requests answered 5xx (5%, at most 5%)',
    });
  });

  it("adds up the gateway's readings over a step, counting from zero again where its counters restarted", () => {
    const first = { requests: 500, errors: 10, countedSince: 1 };
    let seen = addTraffic({ requests: 0, errors: 0 }, undefined, first);
    // The first reading is where the step starts counting; taken as restarted, it is added whole...
    expect(seen).toEqual({ requests: 500, errors: 10 });
    // ...so the rollout starts its total at zero and passes the first reading as the one before.
    seen = addTraffic({ requests: 0, errors: 0 }, first, { requests: 540, errors: 12, countedSince: 1 });
    expect(seen).toEqual({ requests: 40, errors: 2 });
    // Caddy reloaded its config: its counters start from zero at that moment.
    const reloaded = { requests: 15, errors: 5, countedSince: 2 };
    seen = addTraffic(seen, { requests: 540, errors: 12, countedSince: 1 }, reloaded);
    expect(seen).toEqual({ requests: 55, errors: 7 });
    // A counter that went down restarted, even where the gateway gives no reload time.
    expect(addTraffic(seen, { requests: 15, errors: 5 }, { requests: 4, errors: 1 })).toEqual({
      requests: 59,
      errors: 8,
    });
  });

  it("counts each gateway replica apart: one replica's restart loses none of the other's requests", () => {
    const a1 = { requests: 100, errors: 1, countedSince: 1 };
    const b1 = { requests: 300, errors: 3, countedSince: 1 };
    const first = { requests: 400, errors: 4, replicas: { a: a1, b: b1 } };
    // Replica b reloaded (counters from zero), a counted on; a new replica c came with its own.
    const a2 = { requests: 150, errors: 1, countedSince: 1 };
    const b2 = { requests: 20, errors: 2, countedSince: 2 };
    const c2 = { requests: 7, errors: 0, countedSince: 3 };
    const second = { requests: 177, errors: 3, replicas: { a: a2, b: b2, c: c2 } };
    expect(addTraffic({ requests: 0, errors: 0 }, first, second)).toEqual({ requests: 50 + 20 + 7, errors: 2 });
  });

  it("matches a replica's reading named by its whole admin URL (0.2.0) with one named by its origin", () => {
    const before = { requests: 100, errors: 1, countedSince: 1 };
    const first = { requests: 100, errors: 1, replicas: { 'http://admin:pw@10.0.0.7:2019/caddy': before } };
    const now = { requests: 130, errors: 2, countedSince: 1 };
    const second = { requests: 130, errors: 2, replicas: { 'http://10.0.0.7:2019': now } };
    expect(addTraffic({ requests: 0, errors: 0 }, first, second)).toEqual({ requests: 30, errors: 1 });
  });

  it('leaves the decision to a person when too few requests came to judge', () => {
    expect(judgeCanary(plan.analysis, { ...ready, traffic: { requests: 3, errors: 3 } }, true)).toEqual({
      kind: 'inconclusive',
      detail: 'canary 1 of 1 ready; 3 requests in this step, fewer than the 20 needed to judge its error rate',
    });
  });

  it('says so when the gateway does not report the error rate, and judges readiness alone', () => {
    expect(judgeCanary(plan.analysis, ready, true)).toEqual({
      kind: 'healthy',
      detail: 'canary 1 of 1 ready; the gateway does not report its error rate',
    });
    expect(judgeCanary(undefined, ready, true)).toEqual({ kind: 'healthy', detail: 'canary 1 of 1 ready' });
  });
});

describe('a canary request is backed by the live MachineModel or refused', () => {
  const spec = {
    image: 'r/m:2',
    modelPath: '/m',
    maxReplicas: 4,
    rollout: { strategy: 'Canary' as const, steps: [{ weight: 10 }, { weight: 50 }] },
  };
  const v2 = { image: 'r/m:2', modelPath: '/m' };
  it("applies the spec's revision under its plan; withdrawing the share is always backed", () => {
    expect(canaryRequestRefusal(spec, { revision: v2 })).toBeUndefined();
    expect(canaryRequestRefusal(spec, { weight: 50 })).toBeUndefined();
    expect(canaryRequestRefusal(spec, { weight: 0 })).toBeUndefined();
    expect(canaryRequestRefusal({ ...spec, rollout: undefined }, { weight: 0 })).toBeUndefined();
  });
  it('refuses what a workflow started by hand on the task queue asks for (an image no MachineModel names)', () => {
    expect(canaryRequestRefusal(spec, { revision: { image: 'evil.example/miner:1', modelPath: '/m' } })).toMatch(
      /evil.example\/miner:1 .* is not the spec's r\/m:2/,
    );
    expect(canaryRequestRefusal(spec, { revision: { image: 'r/m:2', modelPath: '/etc' } })).toBeDefined();
    expect(canaryRequestRefusal({ ...spec, rollout: undefined }, { revision: v2 })).toMatch(/no rollout plan/);
    expect(canaryRequestRefusal({ ...spec, rollout: undefined }, { weight: 10 })).toMatch(/no rollout plan/);
  });
  it("caps replicas and weight at the spec's: a forged or stale request gets no more than the plan gives", () => {
    expect(canaryCeiling(spec)).toEqual({ replicas: 4, weight: 50 });
    expect(canaryCeiling({ ...spec, replicas: 2 })).toEqual({ replicas: 2, weight: 50 });
    expect(canaryCeiling({ rollout: undefined })).toEqual({ replicas: 1, weight: 0 });
  });
});

describe('judgeCanary judges errors whatever the readiness', () => {
  const analysis = { maxErrorRatePercent: 5, minRequests: 20 };
  it('fails a canary that is not ready but answered enough requests, most of them 5xx (its Pods unready: 502s)', () => {
    const health = { readyReplicas: 0, desiredReplicas: 1, traffic: { requests: 40, errors: 30 } };
    for (const endOfStep of [false, true])
      expect(judgeCanary(analysis, health, endOfStep)).toMatchObject({ kind: 'failed', check: 'ErrorRate' });
  });
  it('waits for a canary that is not ready with too few requests to judge', () => {
    const health = { readyReplicas: 0, desiredReplicas: 1, traffic: { requests: 3, errors: 3 } };
    expect(judgeCanary(analysis, health, true).kind).toBe('waiting');
  });
});
