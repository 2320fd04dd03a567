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
type Action = 'created' | 'updated' | 'deleted';
interface Change {
  kind: string;
  action: Action;
  /** For an update: what changed, e.g. "image x:v1 → x:v2". */
  detail?: string;
}
const eventReasons: Record<Action, string> = { created: 'Created', updated: 'Updated', deleted: 'Deleted' };
const listFormat = new Intl.ListFormat('en', { type: 'conjunction' });

/**
 * Only a rollout that waits is worth reading its Pods: it may wait for the scheduler, or for
 * containers that cannot run (a bad image, a crash loop) or do not pass their readiness probe.
 */
async function withPodHealth(kube: ActivityDeps['kube'], ref: ModelRef, readiness: Readiness): Promise<Readiness> {
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

export function applyChildrenActivity({ kube, build }: ActivityDeps) {
  async function readChecked(ref: ModelRef, apiVersion: string, childKind: string): Promise<Live | undefined> {
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

  /**
   * Whether the spec's revision's canary is as that revision builds it, its Service too: one edited in
   * place (its labels and size kept) gets no share, and the round applies it again. A canary of another
   * revision gets no share anyway.
   */
  async function canaryAsBuilt(ref: ModelRef, spec: ModelSnapshot['spec'], deployment: Live): Promise<boolean> {
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

  /** Applies `desired` unless the live object already has every field we set; the object as it now is. */
  async function ensure(desired: ChildObject, live: Live | undefined, changes: Change[], written: string[]) {
    if (live && isSubset(desired, live)) return live;
    const applied = await kube.apply(desired as KubernetesObject);
    const detail = live ? changedFields(desired.kind, live, desired) : undefined;
    changes.push({ kind: desired.kind, action: live ? 'updated' : 'created', detail });
    written.push(`${desired.kind}/${applied.metadata?.resourceVersion}`);
    return applied as Live;
  }

  return async function applyChildren(snapshot: ModelSnapshot, options: ApplyOptions = {}): Promise<ApplyResult> {
    const { ref, spec } = snapshot;
    const changes: Change[] = [];
    const written: string[] = [];
    let readiness: Readiness;
    let stable: Revision;
    let canary = false;
    let liveCanary: LiveCanary | undefined;
    try {
      const live = await readChecked(ref, 'apps/v1', 'Deployment');
      stable = stableRevisionFor(spec, live && deployedRevision(live as V1Deployment), options.promoted);
      const desired = buildDeployment(ref, specOfRevision(spec, stable), build, live?.spec?.replicas);
      const deployment = await ensure(desired, live, changes, written);
      const service = await readChecked(ref, 'v1', 'Service');
      await ensure(buildService(ref, spec), service, changes, written);
      let autoscaler: Live | undefined;
      if (wantsAutoscaler(spec)) {
        const hpa = await readChecked(ref, 'autoscaling/v2', 'HorizontalPodAutoscaler');
        autoscaler = await ensure(buildAutoscaler(ref, spec, build), hpa, changes, written);
      } else {
        // Only an autoscaler this model made is removed, and that one carries the watched labels: a
        // model without autoscaling asks the apiserver nothing while the watch holds none.
        const hpa = await kube.readLabelled<Live>('autoscaling/v2', 'HorizontalPodAutoscaler', ref.namespace, ref.name);
        if (hpa && ownershipOf(hpa as Parameters<typeof ownershipOf>[0], ref) === 'ours') {
          await kube.delete(hpa, hpa.metadata?.uid);
          changes.push({ kind: 'HorizontalPodAutoscaler', action: 'deleted' });
        }
      }
      readiness = readinessOf(deployment as V1Deployment, autoscaler as V2HorizontalPodAutoscaler | undefined);
      const canaryDeployment = await kube.readLabelled<Live>(
        'apps/v1',
        'Deployment',
        ref.namespace,
        canaryName(ref.name),
      );
      canary = !!canaryDeployment && ownershipOf(canaryDeployment as Parameters<typeof ownershipOf>[0], ref) === 'ours';
      if (canary)
        liveCanary = liveCanaryOf(canaryDeployment as V1Deployment, await canaryAsBuilt(ref, spec, canaryDeployment!));
      // A rollout this call just began has no pods the scheduler could have refused yet.
      if (deployment === live) readiness = await withPodHealth(kube, ref, readiness);
    } catch (err) {
      throw kubeFailure(err, `applying children of MachineModel ${ref.namespace}/${ref.name}`);
    } finally {
      // One Event per action of the round ("Deployment, Service and HorizontalPodAutoscaler created"), not one per object.
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
    return {
      changes: changes.map((c) => `${c.kind} ${c.action}${c.detail ? `: ${c.detail}` : ''}`),
      inferenceURL: inferenceURL(ref, spec, build),
      selector: selectorString(ref.name),
      autoscaler: wantsAutoscaler(spec),
      readiness,
      written,
      ...(spec.rollout
        ? { rollout: { stable, ...(sameRevision(stable, revisionOf(spec)) ? {} : { pending: revisionOf(spec) }) } }
        : {}),
      ...(canary ? { canary, liveCanary } : {}),
    };
  };
}
