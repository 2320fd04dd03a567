import type { KubernetesObject, V1Deployment, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import { revisionLabel, type ModelRef } from '../src/core/api.js';
import {
  buildAutoscaler,
  buildDeployment,
  buildService,
  inferenceURL,
  isSubset,
  selectorString,
  wantsAutoscaler,
  type ChildObject,
} from '../src/core/desired-state.js';
import { changedFields } from '../src/core/child-changes.js';
import { ownershipOf } from '../src/core/ownership.js';
import { containerTroubles, mountTrouble, podsWaitingForVolumes } from '../src/core/container-troubles.js';
import { unschedulablePods } from '../src/core/pod-scheduling.js';
import { readinessOf } from '../src/core/readiness.js';
import { isReady, type Readiness } from '../src/core/status.js';
import {
  buildCanaryDeployment,
  buildCanaryService,
  canaryName,
  deploymentAsBuilt,
  liveCanaryOf,
  serviceAsBuilt,
  type LiveCanary,
} from '../src/core/canary-state.js';
import {
  deployedRevision,
  revisionName,
  revisionOf,
  sameRevision,
  specOfRevision,
  stableRevisionFor,
  type Revision,
} from '../src/core/rollout.js';
import type { ActivityDeps } from './deps.js';
import { fail, kubeFailure } from './failure.js';
import { recordEventBestEffort } from './events.js';
import type { ModelSnapshot } from './read-model.js';

export interface ApplyResult {
  /** Human-readable list of what was written, e.g. "Deployment created"; empty when nothing differed. */
  changes: string[];
  inferenceURL: string;
  selector: string;
  /** The model has a HorizontalPodAutoscaler after this apply. */
  autoscaler: boolean;
  /** The rollout as the Deployment (and autoscaler) read or written here say; no second read needed. */
  readiness: Readiness;
  /** "Kind/resourceVersion" of every object written: the watch events they cause are this round's own echo. */
  written: string[];
  /**
   * With a rollout: the revision the stable Deployment runs, and the spec's when it differs (a canary
   * rollout is due). Absent from results recorded before rollouts existed.
   */
  rollout?: { stable: Revision; pending?: Revision };
  /** A canary Deployment of this model exists (a rollout under way, or one whose canary is still to go). */
  canary?: boolean;
  /** That canary Deployment: its revision, size and ready replicas, from which the round decides its share. */
  liveCanary?: LiveCanary;
}

/** What the model's workflow knows of its rollouts that the stable Deployment depends on. */
export interface ApplyOptions {
  /** The revision a rollout promoted: the stable Deployment moves to it. */
  promoted?: Revision;
}

type Live = KubernetesObject & { spec?: { replicas?: number }; status?: object };
type Kube = ActivityDeps['kube'];
type Build = ActivityDeps['build'];
type Action = 'created' | 'updated' | 'deleted';
interface Change {
  kind: string;
  action: Action;
  /** For an update: what changed, e.g. "image x:v1 → x:v2". */
  detail?: string;
}
/** What the round wrote: its Events and result say the changes; the versions are its own watch echo. */
interface Writes {
  changes: Change[];
  written: string[];
}
/** The children as the round leaves them: what its result reports besides the writes. */
interface Children {
  stable: Revision;
  readiness: Readiness;
  liveCanary?: LiveCanary;
}
const eventReasons: Record<Action, string> = { created: 'Created', updated: 'Updated', deleted: 'Deleted' };
const listFormat = new Intl.ListFormat('en', { type: 'conjunction' });

/**
 * Makes the model's children what its spec asks, then reads what the round decides with: its canary,
 * and the Pods of a rollout that waits. The round's Events are recorded even when a write failed.
 */
export function applyChildrenActivity({ kube, build }: ActivityDeps) {
  return async function applyChildren(snapshot: ModelSnapshot, options: ApplyOptions = {}): Promise<ApplyResult> {
    const { ref } = snapshot;
    const writes: Writes = { changes: [], written: [] };
    let children: Children;
    try {
      children = await applyInTurn(kube, build, snapshot, options, writes);
    } catch (err) {
      throw kubeFailure(err, `applying children of MachineModel ${ref.namespace}/${ref.name}`);
    } finally {
      await recordChanges(kube, ref, writes.changes);
    }
    return resultOf(snapshot, build, children, writes);
  };
}

/**
 * Each child in turn, read before it is written: the stable Deployment (on the revision a rollout
 * promoted), its Service, its autoscaler or none. Then the canary, and the Pods while the rollout waits.
 */
async function applyInTurn(
  kube: Kube,
  build: Build,
  { ref, spec }: ModelSnapshot,
  options: ApplyOptions,
  writes: Writes,
): Promise<Children> {
  const live = await readChecked(kube, ref, 'apps/v1', 'Deployment');
  const stable = stableRevisionFor(spec, live && deployedRevision(live as V1Deployment), options.promoted);
  const desired = buildDeployment(ref, specOfRevision(spec, stable), build, live?.spec?.replicas);
  const deployment = await ensure(kube, desired, live, writes);
  const service = await readChecked(kube, ref, 'v1', 'Service');
  await ensure(kube, buildService(ref, spec), service, writes);
  const autoscaler = await applyAutoscaler(kube, build, ref, spec, writes);
  let readiness = readinessOf(deployment as V1Deployment, autoscaler as V2HorizontalPodAutoscaler | undefined);
  const liveCanary = await readCanary(kube, build, ref, spec);
  // A rollout this call just began has no pods the scheduler could have refused yet.
  if (deployment === live) readiness = await withPodHealth(kube, ref, readiness);
  return { stable, readiness, liveCanary };
}

/** A child of the model's name, refused when it is not the model's own (another's, or a deleted model's). */
async function readChecked(
  kube: Kube,
  ref: ModelRef,
  apiVersion: string,
  childKind: string,
): Promise<Live | undefined> {
  const live = await kube.read<Live>(apiVersion, childKind, ref.namespace, ref.name);
  const owner = ownershipOf(live as Parameters<typeof ownershipOf>[0], ref);
  if (owner === 'foreign') {
    throw fail(
      'NotOwned',
      `${childKind} ${ref.namespace}/${ref.name} exists and is not owned by this MachineModel; ` +
        'delete or rename it, or give the MachineModel another name',
    );
  }
  if (owner === 'previous') {
    throw fail(
      'PreviousOwner',
      `${childKind} ${ref.namespace}/${ref.name} still belongs to a deleted MachineModel of the same name; ` +
        'waiting for the garbage collector',
    );
  }
  return live;
}

/** Applies `desired` unless the live object already has every field we set; the object as it now is. */
async function ensure(kube: Kube, desired: ChildObject, live: Live | undefined, writes: Writes): Promise<Live> {
  if (live && isSubset(desired, live)) return live;
  const applied = await kube.apply(desired as KubernetesObject);
  const detail = live ? changedFields(desired.kind, live, desired) : undefined;
  writes.changes.push({ kind: desired.kind, action: live ? 'updated' : 'created', detail });
  writes.written.push(`${desired.kind}/${applied.metadata?.resourceVersion}`);
  return applied as Live;
}

/** The autoscaler the spec asks for, applied; or none, the model's own removed. */
async function applyAutoscaler(
  kube: Kube,
  build: Build,
  ref: ModelRef,
  spec: ModelSnapshot['spec'],
  writes: Writes,
): Promise<Live | undefined> {
  if (wantsAutoscaler(spec)) {
    const hpa = await readChecked(kube, ref, 'autoscaling/v2', 'HorizontalPodAutoscaler');
    return ensure(kube, buildAutoscaler(ref, spec, build), hpa, writes);
  }
  // Only an autoscaler this model made is removed, and that one carries the watched labels: a
  // model without autoscaling asks the apiserver nothing while the watch holds none.
  const hpa = await kube.readLabelled<Live>('autoscaling/v2', 'HorizontalPodAutoscaler', ref.namespace, ref.name);
  if (hpa && ownershipOf(hpa as Parameters<typeof ownershipOf>[0], ref) === 'ours') {
    await kube.delete(hpa, hpa.metadata?.uid);
    writes.changes.push({ kind: 'HorizontalPodAutoscaler', action: 'deleted' });
  }
  return undefined;
}

/** The model's canary Deployment, if it has one: its revision, size and ready replicas. */
async function readCanary(
  kube: Kube,
  build: Build,
  ref: ModelRef,
  spec: ModelSnapshot['spec'],
): Promise<LiveCanary | undefined> {
  const deployment = await kube.readLabelled<Live>('apps/v1', 'Deployment', ref.namespace, canaryName(ref.name));
  if (!deployment || ownershipOf(deployment as Parameters<typeof ownershipOf>[0], ref) !== 'ours') return undefined;
  return liveCanaryOf(deployment as V1Deployment, await canaryAsBuilt(kube, build, ref, spec, deployment));
}

/**
 * Whether the spec's revision's canary is as that revision builds it, its Service too: one edited in
 * place (its labels and size kept) gets no share, and the round applies it again. A canary of another
 * revision gets no share anyway.
 */
async function canaryAsBuilt(
  kube: Kube,
  build: Build,
  ref: ModelRef,
  spec: ModelSnapshot['spec'],
  deployment: Live,
): Promise<boolean> {
  const revision = revisionOf(spec);
  if (deployment.metadata?.labels?.[revisionLabel] !== revisionName(revision)) return true;
  const replicas = deployment.spec?.replicas ?? 1;
  if (!deploymentAsBuilt(buildCanaryDeployment(ref, spec, revision, replicas, build), deployment)) return false;
  const service = await kube.readLabelled<Live>('v1', 'Service', ref.namespace, canaryName(ref.name));
  return (
    !!service &&
    ownershipOf(service as Parameters<typeof ownershipOf>[0], ref) === 'ours' &&
    serviceAsBuilt(buildCanaryService(ref, spec, revision), service)
  );
}

/**
 * Only a rollout that waits is worth reading its Pods: it may wait for the scheduler, or for
 * containers that cannot run (a bad image, a crash loop) or do not pass their readiness probe.
 */
async function withPodHealth(kube: Kube, ref: ModelRef, readiness: Readiness): Promise<Readiness> {
  if (isReady(readiness)) return readiness;
  const pods = await kube.listPods(ref.namespace, ref.name).catch((err: unknown) => {
    throw kubeFailure(err, `listing the Pods of ${ref.namespace}/${ref.name}`);
  });
  const unschedulable = unschedulablePods(pods);
  let containers = containerTroubles(pods);
  const waiting = podsWaitingForVolumes(pods);
  if (!containers && waiting.length > 0) {
    // A volume the kubelet cannot mount (the model cache's, say): its words are in the Pod's Events.
    const name = waiting[0]!.metadata?.name;
    if (name) containers = mountTrouble(await kube.lastMountFailure(ref.namespace, name), waiting.length);
  }
  if (containers?.kind === 'not-ready') {
    // The probe's own words are in the kubelet's Events, not in the Pod.
    const unready = pods.find((p) => p.status?.containerStatuses?.some((c) => c.state?.running && !c.ready));
    const name = unready?.metadata?.name;
    if (name) containers.probeMessage = await kube.lastProbeFailure(ref.namespace, name);
  }
  return { ...readiness, ...(unschedulable ? { unschedulable } : {}), ...(containers ? { containers } : {}) };
}

/** One Event per action of the round ("Deployment, Service and HorizontalPodAutoscaler created"), not one per object. */
async function recordChanges(kube: Kube, ref: ModelRef, changes: Change[]): Promise<void> {
  for (const action of new Set(changes.map((c) => c.action))) {
    const kinds = listFormat.format(changes.filter((c) => c.action === action).map((c) => c.kind));
    await recordEventBestEffort(
      kube,
      ref,
      'Normal',
      eventReasons[action],
      `${kinds} ${ref.namespace}/${ref.name} ${action}`,
    );
  }
}

function resultOf(
  { ref, spec }: ModelSnapshot,
  build: Build,
  { stable, readiness, liveCanary }: Children,
  { changes, written }: Writes,
): ApplyResult {
  return {
    changes: changes.map((c) => `${c.kind} ${c.action}${c.detail ? `: ${c.detail}` : ''}`),
    inferenceURL: inferenceURL(ref, spec, build),
    selector: selectorString(ref.name),
    autoscaler: wantsAutoscaler(spec),
    readiness,
    written,
    ...(spec.rollout ? { rollout: rolloutOf(spec, stable) } : {}),
    ...(liveCanary ? { canary: true, liveCanary } : {}),
  };
}

/** The revision the stable Deployment runs, and the spec's when it differs: a canary rollout is due. */
function rolloutOf(spec: ModelSnapshot['spec'], stable: Revision): NonNullable<ApplyResult['rollout']> {
  const wanted = revisionOf(spec);
  return { stable, ...(sameRevision(stable, wanted) ? {} : { pending: wanted }) };
}
