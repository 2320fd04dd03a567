// A canary's Deployment and Service: the model's own, for another revision, under another name. Pure.
//
// The canary is an instance of its own (`<name>-canary`), so the stable Deployment's selector, its
// Service and its autoscaler never count or reach the canary's Pods, and adding a rollout to a model
// changes nothing of what runs until a new revision comes.
import { canaryOfLabel, type MachineModelSpec, type ModelRef, revisionLabel, type RolloutSpec } from './api.js';
import {
  buildDeployment,
  buildService,
  childLabels,
  isSubset,
  selectorLabels,
  type BuildOptions,
} from './desired-state.js';
import { readinessOf, type DeploymentView } from './readiness.js';
import { canaryReplicas, revisionName, specOfRevision, type Revision } from './rollout.js';

export const canaryName = (model: string) => `${model}-canary`;

function canaryLabels(model: string, revision: Revision): Record<string, string> {
  return { ...childLabels(canaryName(model)), [canaryOfLabel]: model, [revisionLabel]: revisionName(revision) };
}

export function buildCanaryDeployment(
  ref: ModelRef,
  spec: MachineModelSpec,
  revision: Revision,
  replicas: number,
  opts: BuildOptions,
) {
  const d = buildDeployment(ref, { ...specOfRevision(spec, revision), replicas }, opts);
  const labels = canaryLabels(ref.name, revision);
  return {
    ...d,
    metadata: { ...d.metadata, name: canaryName(ref.name), labels },
    spec: {
      ...d.spec,
      selector: { matchLabels: selectorLabels(canaryName(ref.name)) },
      template: { ...d.spec.template, metadata: { labels } },
    },
  };
}

export function buildCanaryService(ref: ModelRef, spec: MachineModelSpec, revision: Revision) {
  const s = buildService(ref, spec);
  return {
    ...s,
    metadata: { ...s.metadata, name: canaryName(ref.name), labels: canaryLabels(ref.name, revision) },
    spec: { ...s.spec, selector: selectorLabels(canaryName(ref.name)) },
  };
}

type Fields = Record<string, unknown>;
const present = (v: unknown) => v !== undefined && v !== null && !(Array.isArray(v) && v.length === 0);
/** Fields of a Pod spec and of its containers that change what runs, beyond those the operator sets. */
const podRunFields: readonly string[] = ['initContainers', 'ephemeralContainers', 'volumes'];
const containerRunFields: readonly string[] = ['command', 'args', 'envFrom', 'volumeMounts', 'workingDir', 'lifecycle'];

/**
 * What a live canary runs that its revision does not build: fields that change what runs (a command,
 * volumes, init containers), set by someone else. A server-side apply keeps another manager's fields,
 * so such a canary is made again, not applied over. Empty for a canary as its revision builds it.
 */
export function foreignRunFields(desired: ReturnType<typeof buildCanaryDeployment>, live: unknown): string[] {
  const want = desired.spec.template.spec as unknown as Fields;
  const has = ((live as { spec?: { template?: { spec?: Fields } } })?.spec?.template?.spec ?? {}) as Fields;
  const found = podRunFields.filter((f) => present(has[f]) && !present(want[f]));
  const wantContainers = (want.containers ?? []) as Fields[];
  ((has.containers ?? []) as Fields[]).forEach((c, i) => {
    const own = wantContainers[i] ?? {};
    for (const f of containerRunFields) if (present(c[f]) && !present(own[f])) found.push(`${String(c.name)}.${f}`);
  });
  return found;
}

/** The canary Deployment runs what its revision builds: every field the operator sets, and no other that changes what runs. */
export function deploymentAsBuilt(desired: ReturnType<typeof buildCanaryDeployment>, live: unknown): boolean {
  return isSubset(desired, live) && foreignRunFields(desired, live).length === 0;
}

/** The live canary Service's selector has keys beyond the one built: it selects Pods of someone's choosing. */
export function selectorNarrowed(desired: ReturnType<typeof buildCanaryService>, live: unknown): boolean {
  const selector = (live as { spec?: { selector?: Record<string, string> } })?.spec?.selector ?? {};
  return Object.keys(selector).some((k) => !(k in desired.spec.selector));
}

/** The canary Service selects the canary's Pods alone: every field built, its selector not narrowed. */
export function serviceAsBuilt(desired: ReturnType<typeof buildCanaryService>, live: unknown): boolean {
  return isSubset(desired, live) && !selectorNarrowed(desired, live);
}

/** What a rollout asks of the model's round: its canary at this size, and this share at this step. */
export interface CanaryWant {
  /** The rollout's step, 0-based: the share is never above its weight. */
  step: number;
  replicas: number;
  weight: number;
  /** Counts the rollout's asks: the round's answer names the one it answers. */
  seq: number;
}

/** The model's canary Deployment as the round read it. */
export interface LiveCanary {
  /** Its revision label (revisionName). */
  revision: string;
  replicas: number;
  readyReplicas: number;
  /** Its Deployment or Service is not what its revision builds (someone edited it): the round applies it again. */
  edited?: true;
}

/**
 * A live canary Deployment as the round sees it. Its ready replicas count only once every Pod runs
 * its current template: a canary relabelled for a newer revision is not ready on the old one's Pods.
 * An edited canary (`asBuilt` false) has none either: it runs something its revision does not name.
 */
export function liveCanaryOf(
  d: DeploymentView & { metadata?: { labels?: Record<string, string> } },
  asBuilt = true,
): LiveCanary {
  const r = readinessOf(d);
  const current = asBuilt && r.observedLatest && r.updatedReplicas >= r.replicas;
  return {
    revision: d.metadata?.labels?.[revisionLabel] ?? '',
    replicas: r.desiredReplicas,
    readyReplicas: current ? r.readyReplicas : 0,
    ...(asBuilt ? {} : { edited: true as const }),
  };
}

/** The running rollout as the model's round sees it. */
export interface RoundRollout {
  revision: Revision;
  plan: RolloutSpec;
  /** The stable Deployment's replicas when the rollout began: a share needs that many canary replicas ready. */
  stableReplicas: number;
  want?: CanaryWant;
}

/**
 * The canary's share of the model's requests, decided by the model's round from what the running
 * rollout asks and the canary as it is now (level-triggered: every round, from the current step):
 * none without a running rollout, none for a canary of another revision or not ready to carry it,
 * never above the step's weight.
 */
export function canaryShare(rollout: RoundRollout | undefined, live: LiveCanary | undefined): number {
  const want = rollout?.want;
  if (!rollout || !want || !live || live.revision !== revisionName(rollout.revision)) return 0;
  const weight = Math.min(want.weight, rollout.plan.steps[want.step]?.weight ?? 0);
  if (weight <= 0) return 0;
  return live.readyReplicas >= canaryReplicas(rollout.stableReplicas, weight) ? weight : 0;
}

/**
 * What the model's round does with the canary objects: the running rollout's at the size it asks
 * and as its revision builds them, kept while a promoted revision becomes stable, removed otherwise. Nothing before a rollout asks.
 */
export function canaryUpkeep(
  rollout: RoundRollout | undefined,
  live: LiveCanary | undefined,
  promotedAwaitingStable: boolean,
): { do: 'apply'; replicas: number } | { do: 'keep' } | { do: 'remove' } {
  if (rollout) {
    const want = rollout.want;
    if (!want) return { do: 'keep' };
    const current =
      live && live.revision === revisionName(rollout.revision) && live.replicas === want.replicas && !live.edited;
    return current ? { do: 'keep' } : { do: 'apply', replicas: want.replicas };
  }
  if (promotedAwaitingStable || !live) return { do: 'keep' };
  return { do: 'remove' };
}
