// What generic tools make of a MachineModel's status: kstatus (sigs.k8s.io/cli-utils, what Flux's
// health checks and kpt's --reconcile-timeout wait on), built from its Go module, reads the status that
// src/core/status.ts computes for each kind of round. In the stack tier because it needs Go.
import { execFileSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import type { MachineModelStatus } from '../../src/core/api.js';
import { computeStatus, type Readiness, type StatusInput } from '../../src/core/status.js';
import { kstatus } from '../../tools/local-stack/components.js';
import { ensureInstalled } from '../../tools/local-stack/install.js';

let binary: string;
beforeAll(async () => {
  binary = await ensureInstalled(kstatus);
}, 300_000);

const now = '2026-11-24T10:00:00Z';
const rolledOut: Readiness = {
  found: true,
  desiredReplicas: 2,
  replicas: 2,
  readyReplicas: 2,
  availableReplicas: 2,
  updatedReplicas: 2,
  observedLatest: true,
  available: { status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' },
};
const rollingOut: Readiness = { ...rolledOut, readyReplicas: 0, availableReplicas: 0 };

function model(status: MachineModelStatus, metadata: object = {}) {
  return {
    apiVersion: 'stable.example.com/v1',
    kind: 'MachineModel',
    metadata: { name: 'm', namespace: 'default', generation: 1, ...metadata },
    status,
  };
}

const status = (input: Omit<StatusInput, 'generation' | 'now'>, prev?: MachineModelStatus) =>
  computeStatus(prev, { generation: 1, now, ...input });

/** kstatus' verdict on each object, in order. */
function kstatusOf(objects: object[]): { status: string; message: string }[] {
  return execFileSync(binary, { input: JSON.stringify(objects), encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { status: string; message: string });
}

describe('kstatus reads a MachineModel', () => {
  it('Ready as Current, a rollout as InProgress, a failure that needs a person as Failed', () => {
    const failed = status({ verdict: { kind: 'failed', reason: 'NotOwned', message: 'Deployment default/m exists' } });
    const cases: [string, object, string][] = [
      ['Ready', model(status({ verdict: { kind: 'ready' }, readiness: rolledOut })), 'Current'],
      ['Deploying', model(status({ verdict: { kind: 'progressing' }, readiness: rollingOut })), 'InProgress'],
      [
        'Pending (unschedulable)',
        model(
          status({
            verdict: { kind: 'progressing' },
            readiness: { ...rollingOut, unschedulable: { pods: 2, message: '0/1 nodes: Insufficient nvidia.com/gpu' } },
          }),
        ),
        'InProgress',
      ],
      [
        'invalid spec',
        model(
          status({ verdict: { kind: 'failed', reason: 'InvalidSpec', message: 'spec.maxReplicas < minReplicas' } }),
        ),
        'Failed',
      ],
      ['a name owned by someone else', model(failed), 'Failed'],
      [
        'progress deadline',
        model(status({ verdict: { kind: 'deadline-exceeded', deadlineSeconds: 600 }, readiness: rollingOut })),
        'Failed',
      ],
      [
        'recovered after a failure',
        model(status({ verdict: { kind: 'ready' }, readiness: rolledOut }, failed)),
        'Current',
      ],
      [
        'a new generation not yet observed',
        model(status({ verdict: { kind: 'ready' }, readiness: rolledOut }), { generation: 2 }),
        'InProgress',
      ],
      [
        'deleting',
        model(status({ verdict: { kind: 'deleting', message: 'removing the gateway route' } }), {
          deletionTimestamp: now,
        }),
        'Terminating',
      ],
    ];
    const seen = kstatusOf(cases.map(([, object]) => object));
    expect(cases.map(([what], i) => `${what}: ${seen[i]!.status}`)).toEqual(
      cases.map(([what, , expected]) => `${what}: ${expected}`),
    );
    // The failure's own words, not a generic line.
    expect(seen[4]!.message).toBe('Deployment default/m exists');
  });

  it('read a Failed phase without Stalled as InProgress (what v0.1.0 wrote), so the condition is what matters', () => {
    const before = {
      phase: 'Failed' as const,
      observedGeneration: 1,
      conditions: [
        { type: 'Ready', status: 'False' as const, reason: 'NotOwned', message: 'taken', lastTransitionTime: now },
      ],
    };
    expect(kstatusOf([model(before)])[0]!.status).toBe('InProgress');
  });
});
