// The canary of a rollout: its Deployment and Service, and its requests on the gateway. The model's
// round is their only writer (syncCanary); the rollout only reads them (canaryHealth, canaryTraffic).
// Each step is idempotent: a retry or a replayed round changes nothing that is already as asked.
import { log } from '@temporalio/activity';
import type { KubernetesObject, V1Deployment } from '@kubernetes/client-node';
import type { MachineModelSpec, ModelRef } from '../src/core/api.js';
import {
  buildCanaryDeployment,
  buildCanaryService,
  canaryName,
  deploymentAsBuilt,
  foreignRunFields,
  liveCanaryOf,
  selectorNarrowed,
} from '../src/core/canary-state.js';
import { containerTroubles } from '../src/core/container-troubles.js';
import { isSubset } from '../src/core/desired-state.js';
import { ownershipOf } from '../src/core/ownership.js';
import { routeId } from '../src/core/route-rules.js';
import {
  canaryCeiling,
  canaryRequestRefusal,
  revisionName,
  revisionOf,
  type CanaryHealth,
  type Revision,
  type TrafficSample,
} from '../src/core/rollout.js';
import type { ActivityDeps } from './deps.js';
import { fail, kubeFailure } from './failure.js';
import { apiStatus } from '../src/process/kube-errors.js';

type Owned = Parameters<typeof ownershipOf>[0];
type Kube = ActivityDeps['kube'];

/**
 * Why the live MachineModel does not back a request (logged, never applied), if it does not. Not
 * retried: a round that read the spec before a newer revision came would ask for the old one for
 * ever; the change that made it stale woke the next round.
 */
function disagreement(
  ref: ModelRef,
  spec: MachineModelSpec,
  request: Parameters<typeof canaryRequestRefusal>[1],
): string | undefined {
  const refusal = canaryRequestRefusal(spec, request);
  if (!refusal) return undefined;
  log.warn('refused a canary request the MachineModel does not back', {
    model: `${ref.namespace}/${ref.name}`,
    refusal,
  });
  return `refused for MachineModel ${ref.namespace}/${ref.name}: ${refusal}`;
}

/** `asked`, cut to the live spec's ceiling (canaryCeiling), saying so when it had to. */
function withinCeiling(ref: ModelRef, what: 'replicas' | 'weight', asked: number, ceiling: number): number {
  if (asked <= ceiling) return asked;
  log.warn('cut a canary request to what the MachineModel allows', {
    model: `${ref.namespace}/${ref.name}`,
    what,
    asked,
    ceiling,
  });
  return ceiling;
}

/**
 * The canary's share as the route may carry it: 0 unless the live spec has a rollout plan, and never
 * above its highest step. The round decides the share (canaryShare); this bounds what a forged call
 * could ask.
 */
export function boundedShare(ref: ModelRef, spec: MachineModelSpec, asked: number): number {
  if (asked <= 0 || canaryRequestRefusal(spec, { weight: asked })) return 0;
  return withinCeiling(ref, 'weight', asked, canaryCeiling(spec).weight);
}

async function readOurs<T extends KubernetesObject>(kube: Kube, ref: ModelRef, apiVersion: string, kind: string) {
  const name = canaryName(ref.name);
  const live = await kube.read<T>(apiVersion, kind, ref.namespace, name);
  if (live && ownershipOf(live as Owned, ref) !== 'ours') {
    throw fail('NotOwned', `${kind} ${ref.namespace}/${name} exists and is not this MachineModel's canary`);
  }
  return live;
}

/** What the running rollout asks of its canary: its revision, at this size. */
interface CanaryRequest {
  revision: Revision;
  replicas: number;
}

/** A request the live MachineModel backs: its spec, the spec's revision, and the size within its ceiling. */
interface BackedCanary {
  spec: MachineModelSpec;
  revision: Revision;
  replicas: number;
}

/**
 * The model's round makes the canary what the running rollout asks (its revision, at `replicas`), or
 * removes it (no revision given). The revision is the live spec's: a request for another is refused,
 * and the objects are built from the spec, so a forged revision carrying other fields adds nothing.
 */
export function syncCanaryActivity({ kube, build }: ActivityDeps) {
  return async function syncCanary(input: {
    ref: ModelRef;
    /** The running rollout's revision and the size it asks; none: the canary goes. */
    canary?: CanaryRequest;
  }): Promise<{ changes: string[]; refused?: string }> {
    const { ref, canary } = input;
    try {
      if (!canary) return { changes: await removeCanary(kube, ref) };
      const backed = await backedByModel(kube, ref, canary);
      if ('refused' in backed) return { changes: [], refused: backed.refused };
      const deployment = await keepCanaryDeployment(kube, build, ref, backed);
      const service = await keepCanaryService(kube, ref, backed);
      return { changes: [...deployment, ...service] };
    } catch (err) {
      throw kubeFailure(err, `keeping the canary of MachineModel ${ref.namespace}/${ref.name}`);
    }
  };
}

/** The canary's objects, those of this model only. */
async function removeCanary(kube: Kube, ref: ModelRef): Promise<string[]> {
  const changes: string[] = [];
  // The Service first: a Deployment left without one takes no requests.
  for (const [apiVersion, kind] of [
    ['v1', 'Service'],
    ['apps/v1', 'Deployment'],
  ] as const) {
    const live = await kube.read(apiVersion, kind, ref.namespace, canaryName(ref.name));
    if (!live || ownershipOf(live as Owned, ref) !== 'ours') continue;
    await kube.delete(live, live.metadata?.uid);
    changes.push(`canary ${kind} removed`);
  }
  return changes;
}

/** The request as the live MachineModel backs it, or why it does not. */
async function backedByModel(
  kube: Kube,
  ref: ModelRef,
  canary: CanaryRequest,
): Promise<BackedCanary | { refused: string }> {
  const model = await kube.getModel(ref.namespace, ref.name);
  if (!model || model.metadata.uid !== ref.uid || model.metadata.deletionTimestamp) {
    // Its next round cleans up instead; a canary would only go again with the model.
    return { refused: `MachineModel ${ref.namespace}/${ref.name} (uid ${ref.uid}) is gone or deleting` };
  }
  const refused = disagreement(ref, model.spec, { revision: canary.revision });
  if (refused) return { refused };
  const asked = Math.max(1, Math.floor(canary.replicas) || 1);
  return {
    spec: model.spec,
    revision: revisionOf(model.spec),
    replicas: withinCeiling(ref, 'replicas', asked, canaryCeiling(model.spec).replicas),
  };
}

/** The canary Deployment as its revision builds it, at the backed size. */
async function keepCanaryDeployment(
  kube: Kube,
  build: ActivityDeps['build'],
  ref: ModelRef,
  { spec, revision, replicas }: BackedCanary,
): Promise<string[]> {
  const changes: string[] = [];
  const desired = buildCanaryDeployment(ref, spec, revision, replicas, build);
  const readDeployment = () => readOurs<V1Deployment>(kube, ref, 'apps/v1', 'Deployment');
  const deployment = await readDeployment();
  const foreign = deployment ? foreignRunFields(desired, deployment) : [];
  // An apply would keep what another manager set: made again, with the share at none meanwhile.
  const remade =
    foreign.length > 0 &&
    (await madeAgain(
      kube,
      ref,
      deployment!,
      readDeployment,
      (d) => foreignRunFields(desired, d).length > 0,
      `it ran ${foreign.join(', ')}, which its revision does not set`,
    ));
  if (remade) changes.push(`canary Deployment made again (it ran ${foreign.join(', ')})`);
  if (remade || !deployment || !isSubset(desired, deployment)) {
    await kube.apply(desired as V1Deployment);
    changes.push(`canary Deployment: ${replicas} × ${revision.image}`);
  }
  return changes;
}

/** The canary Service as its revision builds it. */
async function keepCanaryService(kube: Kube, ref: ModelRef, { spec, revision }: BackedCanary): Promise<string[]> {
  const service = buildCanaryService(ref, spec, revision);
  const readService = () => readOurs(kube, ref, 'v1', 'Service');
  const live = await readService();
  // An apply would keep the other manager's selector keys: made again, as the Deployment.
  const narrowed =
    !!live &&
    selectorNarrowed(service, live) &&
    (await madeAgain(kube, ref, live, readService, (l) => selectorNarrowed(service, l), 'its selector was narrowed'));
  if (narrowed || !live || !isSubset(service, live)) await kube.apply(service as KubernetesObject);
  return narrowed ? ['canary Service made again (its selector was narrowed)'] : [];
}

/**
 * Deletes a canary object someone changed, to make it again: only the version read, so a newer
 * round's relabel, or another owner's since, stays. Status writes move a Deployment's version on,
 * so a conflict reads it again and, while only its status moved, decides again, a few times.
 * False: it no longer needs to go, or it changed beyond its status (the next round decides).
 */
async function madeAgain<T extends KubernetesObject>(
  kube: Kube,
  ref: ModelRef,
  read: T,
  readAgain: () => Promise<T | undefined>,
  stillToGo: (live: T) => boolean,
  why: string,
): Promise<boolean> {
  log.warn('deleting the canary object someone changed, to make it again', {
    model: `${ref.namespace}/${ref.name}`,
    kind: read.kind,
    why,
  });
  let live: T | undefined = read;
  // Read again, only status may have moved on: the same object at the same generation. A newer
  // round's relabel or another owner's change (a new generation, or a Service's new version) stays.
  const sameSpec = (l: T) =>
    l.metadata?.uid === read.metadata?.uid &&
    read.metadata?.generation !== undefined &&
    l.metadata?.generation === read.metadata.generation;
  for (let attempt = 1; live && stillToGo(live); attempt++) {
    try {
      await kube.delete(live, live.metadata?.uid, live.metadata?.resourceVersion);
      return true;
    } catch (err) {
      if (apiStatus(err) !== 409 || attempt >= 3) throw err;
    }
    const again = await readAgain();
    if (again && !sameSpec(again)) return false;
    live = again;
  }
  return false;
}

/**
 * The rollout's look at its canary: read only. A canary of another revision (the model's round has
 * not relabelled it yet) has no ready replica for this rollout; one not yet at the asked size counts
 * the ready replicas it has, which carry the share it has while it grows.
 */
export function canaryHealthActivity({ kube, build }: ActivityDeps) {
  return async function canaryHealth(input: {
    ref: ModelRef;
    revision: Revision;
    replicas: number;
  }): Promise<CanaryHealth> {
    const { ref, revision, replicas } = input;
    try {
      const deployment = await readOurs<V1Deployment>(kube, ref, 'apps/v1', 'Deployment');
      const labelled = deployment && liveCanaryOf(deployment);
      if (!labelled || labelled.revision !== revisionName(revision)) {
        return { readyReplicas: 0, desiredReplicas: replicas };
      }
      // An edited canary is not this revision's, whatever its label says (as the model's round judges it).
      const model = await kube.getModel(ref.namespace, ref.name);
      const asBuilt =
        !!model &&
        deploymentAsBuilt(
          buildCanaryDeployment(ref, model.spec, revision, deployment.spec?.replicas ?? 1, build),
          deployment,
        );
      const live = asBuilt ? labelled : liveCanaryOf(deployment, false);
      const readyReplicas = Math.min(live.readyReplicas, replicas);
      if (readyReplicas >= replicas) return { readyReplicas, desiredReplicas: replicas };
      const trouble = containerTroubles(await kube.listPods(ref.namespace, canaryName(ref.name)));
      return { readyReplicas, desiredReplicas: replicas, ...(trouble ? { trouble } : {}) };
    } catch (err) {
      throw kubeFailure(err, `reading the canary of MachineModel ${ref.namespace}/${ref.name}`);
    }
  };
}

/**
 * The canary's requests and 5xx answers as the gateway counts them (Caddy: since its last config
 * load). Undefined where the gateway does not count them per backend (the Gateway API driver), or
 * cannot be read just now: the rollout reads again at its next look, and says when it never could.
 */
export function canaryTrafficActivity({ gateway }: ActivityDeps) {
  return async function canaryTraffic(input: { ref: ModelRef }): Promise<TrafficSample | undefined> {
    if (!gateway?.traffic) return undefined;
    try {
      return await gateway.traffic(routeId(input.ref));
    } catch (err) {
      log.warn("could not read the canary's requests", {
        model: `${input.ref.namespace}/${input.ref.name}`,
        error: err instanceof Error ? err.message : String(err),
      });
      return undefined;
    }
  };
}
