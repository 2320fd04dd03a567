import { describe, expect, it } from 'vitest';
import { changedFields } from '../../src/core/child-changes.js';
import { applySummary, readinessSummary, statusSummary, waitSummary } from '../../src/core/step-summaries.js';
import { readiness } from '../support/readiness.js';

const spec = { image: 'reg/m:v2', modelPath: '/m', resources: { cpu: '1', memory: '1Gi' } };

describe('the summaries a round leaves in the Web UI', () => {
  it('says what is applied: image and size', () => {
    expect(applySummary(spec)).toBe('apply reg/m:v2, 1 replica');
    expect(applySummary({ ...spec, minReplicas: 2, maxReplicas: 5 })).toBe('apply reg/m:v2, 2–5 replicas (autoscaled)');
    expect(applySummary({ ...spec, minReplicas: 2, maxReplicas: 5, replicas: 3 })).toBe(
      'apply reg/m:v2, 3 replicas (fixed)',
    );
  });

  it('says the phase it moves to, what it saw and what the round changed', () => {
    expect(
      statusSummary('Ready', 'Deploying', { ...readiness(1, 2), observedLatest: false }, [
        'Deployment updated: image a → b',
      ]),
    ).toBe('status Ready → Deploying · 1 of 2 ready, rollout starting · Deployment updated: image a → b');
    expect(statusSummary('Ready', 'Ready', readiness(2, 2))).toBe('status Ready · 2 of 2 ready, 2 updated');
    expect(statusSummary(undefined, 'Failed', undefined)).toBe('status new → Failed');
  });

  it("names the containers' trouble, without the runtime's long message", () => {
    const pull = {
      ...readiness(0, 1),
      containers: {
        kind: 'image-pull' as const,
        pods: 1,
        container: 'model',
        image: 'reg/m:v9',
        reason: 'ImagePullBackOff',
        message: 'Back-off pulling image "reg/m:v9": a long runtime message',
      },
    };
    expect(statusSummary('Deploying', 'Failed', pull)).toBe(
      'status Deploying → Failed · 0 of 1 ready, 1 updated · ImagePullFailed: image reg/m:v9 cannot be pulled (ImagePullBackOff, 1 pod)',
    );
    const oom = {
      ...readiness(0, 1),
      containers: {
        kind: 'crash-loop' as const,
        pods: 1,
        container: 'model',
        restarts: 4,
        lastReason: 'OOMKilled',
        exitCode: 137,
        memoryLimit: '48Mi',
      },
    };
    expect(waitSummary('Failed', 60, readinessSummary(oom))).toContain(
      'CrashLoopBackOff: container model keeps crashing (4 restarts, 1 pod): last killed for using more memory than its limit of 48Mi (OOMKilled)',
    );
  });

  it('says what a wait is for', () => {
    expect(waitSummary('Deploying', 10, '1 of 2 ready')).toBe(
      'wait for readiness (1 of 2 ready): look again in 10 s unless a change comes',
    );
    expect(waitSummary('Ready', 600, '2 of 2 ready')).toBe('idle: drift check in 600 s unless a change comes');
  });
});

describe('changedFields', () => {
  const deployment = (image: string, replicas: number, memory: string) => ({
    spec: { replicas, template: { spec: { containers: [{ image, resources: { limits: { cpu: '1', memory } } }] } } },
  });
  it('names the fields a person looks for, before and after', () => {
    expect(changedFields('Deployment', deployment('m:v1', 2, '1Gi'), deployment('m:v2', 3, '1Gi'))).toBe(
      'image m:v1 → m:v2, replicas 2 → 3',
    );
    expect(
      changedFields(
        'HorizontalPodAutoscaler',
        { spec: { minReplicas: 1, maxReplicas: 4 } },
        {
          spec: { minReplicas: 2, maxReplicas: 6 },
        },
      ),
    ).toBe('bounds 1–4 → 2–6');
  });

  it('says nothing of a quantity written back in another form, or of fields it does not show', () => {
    expect(changedFields('Deployment', deployment('m:v1', 2, '512Mi'), deployment('m:v1', 2, '0.5Gi'))).toBe('');
    expect(changedFields('ConfigMap', {}, { data: { a: 'b' } })).toBe('');
  });
});
