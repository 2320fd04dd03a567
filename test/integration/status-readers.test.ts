// What generic tools make of a MachineModel's status, for the status src/core/status.ts computes for
// each kind of round: kstatus (sigs.k8s.io/cli-utils, what Flux's health checks and kpt's
// --reconcile-timeout wait on) and Argo CD running deploy/argocd/health.lua, both built from their Go
// modules (tools/status-readers). In the stack tier because it needs Go.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { MachineModelStatus } from '../../src/core/api.js';
import { computeStatus, type Readiness, type StatusInput } from '../../src/core/status.js';
import { statusReaders } from '../../tools/local-stack/components.js';
import { ensureInstalled } from '../../tools/local-stack/install.js';

let binary: string;
beforeAll(async () => {
  binary = await ensureInstalled(statusReaders);
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

const argocdHealth = fileURLToPath(new URL('../../deploy/argocd/health.lua', import.meta.url));

/** A reader's verdict on each object, in order. */
function read(args: string[], objects: object[]): { status: string; message: string }[] {
  return execFileSync(binary, args, { input: JSON.stringify(objects), encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { status: string; message: string });
}
const kstatusOf = (objects: object[]) => read(['kstatus'], objects);
const argocdOf = (objects: object[]) => read(['argocd', argocdHealth], objects);

const failed = status({ verdict: { kind: 'failed', reason: 'NotOwned', message: 'Deployment default/m exists' } });

/** Each kind of round's status, and what kstatus and Argo CD (deploy/argocd/health.lua) must read it as. */
const cases: { what: string; object: object; kstatus: string; argocd: string }[] = [
  {
    what: 'Ready',
    object: model(status({ verdict: { kind: 'ready' }, readiness: rolledOut })),
    kstatus: 'Current',
    argocd: 'Healthy',
  },
  {
    what: 'Deploying',
    object: model(status({ verdict: { kind: 'progressing' }, readiness: rollingOut })),
    kstatus: 'InProgress',
    argocd: 'Progressing',
  },
  {
    what: 'Pending (unschedulable)',
    object: model(
      status({
        verdict: { kind: 'progressing' },
        readiness: { ...rollingOut, unschedulable: { pods: 2, message: '0/1 nodes: Insufficient nvidia.com/gpu' } },
      }),
    ),
    kstatus: 'InProgress',
    argocd: 'Progressing',
  },
  {
    what: 'invalid spec',
    object: model(
      status({ verdict: { kind: 'failed', reason: 'InvalidSpec', message: 'spec.maxReplicas < minReplicas' } }),
    ),
    kstatus: 'Failed',
    argocd: 'Degraded',
  },
  { what: 'a name owned by someone else', object: model(failed), kstatus: 'Failed', argocd: 'Degraded' },
  {
    what: 'progress deadline',
    object: model(status({ verdict: { kind: 'deadline-exceeded', deadlineSeconds: 600 }, readiness: rollingOut })),
    kstatus: 'Failed',
    argocd: 'Degraded',
  },
  {
    what: 'recovered after a failure',
    object: model(status({ verdict: { kind: 'ready' }, readiness: rolledOut }, failed)),
    kstatus: 'Current',
    argocd: 'Healthy',
  },
  {
    what: 'a new generation not yet observed',
    object: model(status({ verdict: { kind: 'ready' }, readiness: rolledOut }), { generation: 2 }),
    kstatus: 'InProgress',
    argocd: 'Progressing',
  },
  {
    what: 'deleting',
    object: model(status({ verdict: { kind: 'deleting', message: 'removing the gateway route' } }), {
      deletionTimestamp: now,
    }),
    kstatus: 'Terminating',
    argocd: 'Progressing',
  },
  { what: 'no status yet', object: model({}), kstatus: 'Current', argocd: 'Progressing' },
];
const ownedBySomeoneElse = cases.findIndex((c) => c.what === 'a name owned by someone else');

describe('kstatus reads a MachineModel', () => {
  it('Ready as Current, a rollout as InProgress, a failure that needs a person as Failed', () => {
    const seen = kstatusOf(cases.map((c) => c.object));
    expect(cases.map((c, i) => `${c.what}: ${seen[i]!.status}`)).toEqual(cases.map((c) => `${c.what}: ${c.kstatus}`));
    // The failure's own words, not a generic line.
    expect(seen[ownedBySomeoneElse]!.message).toBe('Deployment default/m exists');
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

describe("Argo CD's health check (deploy/argocd/health.lua) reads a MachineModel", () => {
  it('Ready as Healthy, a failure that needs a person as Degraded, anything else as Progressing', () => {
    const seen = argocdOf(cases.map((c) => c.object));
    expect(cases.map((c, i) => `${c.what}: ${seen[i]!.status}`)).toEqual(cases.map((c) => `${c.what}: ${c.argocd}`));
    expect(seen[ownedBySomeoneElse]!.message).toBe('NotOwned: Deployment default/m exists');
  });
});
