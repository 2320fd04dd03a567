// The one-line summaries the Web UI shows for a round's steps and waits: what was asked, seen and
// changed. Pure and workflow-safe: the workflow computes them from what its history already holds.
import type { MachineModelSpec, Phase } from './api.js';
import { describeTrouble, troubleReasons } from './container-troubles.js';
import { withDefaults } from './desired-state.js';
import type { Readiness } from './status.js';

const replicas = (n: number) => (n === 1 ? '1 replica' : `${n} replicas`);

function sizeOf(spec: MachineModelSpec): string {
  const s = withDefaults(spec);
  if (s.replicas !== undefined) return `${replicas(s.replicas)} (fixed)`;
  return s.minReplicas === s.maxReplicas
    ? replicas(s.minReplicas)
    : `${s.minReplicas}–${s.maxReplicas} replicas (autoscaled)`;
}

/** "apply my-registry/classifier:v1.3.0, 2–5 replicas (autoscaled)" */
export function applySummary(spec: MachineModelSpec): string {
  return `apply ${spec.image}, ${sizeOf(spec)}`;
}

/**
 * "1 of 2 ready, 1 updated"; right after a change, the Deployment controller has not seen it yet. With
 * the containers' trouble when they have one: "… · CrashLoopBackOff: container model keeps crashing …".
 */
export function readinessSummary(r: Readiness | undefined): string | undefined {
  if (!r) return undefined;
  if (!r.found) return 'no Deployment yet';
  const ready = `${r.readyReplicas} of ${r.desiredReplicas} ready`;
  const progress = r.observedLatest ? `${ready}, ${r.updatedReplicas} updated` : `${ready}, rollout starting`;
  const trouble = r.containers && `${troubleReasons[r.containers.kind]}: ${describeTrouble(r.containers, false)}`;
  return trouble ? `${progress} · ${trouble}` : progress;
}

/** "status Ready → Deploying · 2 of 2 ready · Deployment updated: image a → b" */
export function statusSummary(
  before: Phase | undefined,
  after: Phase,
  readiness: Readiness | undefined,
  changes: string[] = [],
): string {
  const phase = before === after ? `status ${after}` : `status ${before ?? 'new'} → ${after}`;
  return [phase, readinessSummary(readiness), ...changes].filter(Boolean).join(' · ');
}

/** The summary of the wait between rounds. */
export function waitSummary(phase: Phase | undefined, seconds: number, seen: string | undefined): string {
  if (phase === 'Ready') return `idle: drift check in ${seconds} s unless a change comes`;
  return `wait for readiness${seen ? ` (${seen})` : ''}: look again in ${seconds} s unless a change comes`;
}
