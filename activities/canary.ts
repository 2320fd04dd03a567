// The canary of a rollout: its Deployment and Service, its share of the model's requests on the
// gateway, and its removal. Each step is idempotent: a retry or a replayed rollout changes nothing
// that is already as asked.
import { log } from '@temporalio/activity';
import type { KubernetesObject, V1Deployment } from '@kubernetes/client-node';
import { canaryWeightAnnotation, type MachineModel, type MachineModelSpec, type ModelRef } from '../src/core/api.js';
import {
  buildCanaryDeployment,
  buildCanaryService,
  canaryName,
  isCanaryOf,
  resetsShare,
} from '../src/core/canary-state.js';
import { containerTroubles } from '../src/core/container-troubles.js';
import { isSubset } from '../src/core/desired-state.js';
import { ownershipOf } from '../src/core/ownership.js';
import { readinessOf } from '../src/core/readiness.js';
import { matchedPrefix, routeId, routeSpec, wantsRoute } from '../src/core/route-rules.js';
import {
  canaryCeiling,
  canaryRequestRefusal,
  revisionOf,
  type CanaryHealth,
  type Revision,
  type TrafficSample,
} from '../src/core/rollout.js';
import { isReady } from '../src/core/status.js';
import type { ActivityDeps } from './deps.js';
import { apiStatus } from '../src/process/kube-errors.js';
import { fail, gatewayFailure, kubeFailure } from './failure.js';
import { readDelegation, routeRefusalFor } from './route-refusal.js';

/** The canary's weight as its Service declares it; 0 without a canary. */
export async function canaryWeightOf(kube: ActivityDeps['kube'], ref: ModelRef): Promise<number> {
  const service = await kube.readLabelled<KubernetesObject>('v1', 'Service', ref.namespace, canaryName(ref.name));
  if (!service || ownershipOf(service as Owned, ref) !== 'ours') return 0;
  const weight = Number(service.metadata?.annotations?.[canaryWeightAnnotation] ?? 0);
  return Number.isInteger(weight) && weight > 0 && weight < 100 ? weight : 0;
}

/** The field manager of the canary's weight, apart from the operator's own: applying one never drops the other. */
const weightManager = 'machinemodel-operator-rollout';

type Owned = Parameters<typeof ownershipOf>[0];

/** Tries a read-check-write again when the object changed between the read and the write (409). */
async function onFreshRead<T>(what: string, attempt: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await attempt();
    } catch (err) {
      if (apiStatus(err) !== 409 || i >= 4) throw err;
      log.info('the canary changed while being written: read again', { what });
    }
  }
}

/**
 * The canary's weight on its Service, as the rollout's own field manager declares it; with the
 * Service's resourceVersion, applied only to the Service as it was read.
 */
function weightDeclaration(ref: ModelRef, weight: number, resourceVersion?: string): KubernetesObject {
  const metadata = {
    name: canaryName(ref.name),
    namespace: ref.namespace,
    ...(resourceVersion ? { resourceVersion } : {}),
  };
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { ...metadata, annotations: { [canaryWeightAnnotation]: String(weight) } },
  };
}

/**
 * Refuses (logged, never applied) a request the live MachineModel does not back. Retryable: a rollout
 * overtaken by a newer revision asks for its own until its workflow cancels it.
 */
function refuseDisagreement(
  ref: ModelRef,
  spec: MachineModelSpec,
  request: Parameters<typeof canaryRequestRefusal>[1],
) {
  const refusal = canaryRequestRefusal(spec, request);
  if (!refusal) return;
  log.warn('refused a canary request the MachineModel does not back', {
    model: `${ref.namespace}/${ref.name}`,
    refusal,
  });
  throw fail('Transient', `refused for MachineModel ${ref.namespace}/${ref.name}: ${refusal}`);
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
 * Puts the model's route with the canary's share, only where the model's round published it (its
 * checks passed): none is created here, not for a model being deleted, not at a refused prefix.
 */
async function splitPublishedRoute(
  { kube, build, gateway }: ActivityDeps,
  ref: ModelRef,
  spec: MachineModelSpec,
  weight: number,
): Promise<boolean> {
  if (!gateway || !wantsRoute(spec)) return false;
  const route = routeSpec(ref, spec, build, weight);
  if (await routeRefusalFor(route, readDelegation(kube))) return false;
  const published = (await gateway.list()).some(
    (r) => r.id === route.id && matchedPrefix(r.pathPrefix) === matchedPrefix(route.pathPrefix),
  );
  return published && (await gateway.put(route));
}

export function applyCanaryActivity(deps: ActivityDeps) {
  const { kube, build } = deps;
  async function readOurs<T extends KubernetesObject>(ref: ModelRef, apiVersion: string, kind: string) {
    const name = canaryName(ref.name);
    const live = await kube.read<T>(apiVersion, kind, ref.namespace, name);
    if (live && ownershipOf(live as Owned, ref) !== 'ours') {
      throw fail('NotOwned', `${kind} ${ref.namespace}/${name} exists and is not this MachineModel's canary`);
    }
    return live;
  }

  return async function applyCanary(input: {
    ref: ModelRef;
    revision: Revision;
    replicas: number;
  }): Promise<CanaryHealth> {
    const { ref } = input;
    let replicas = input.replicas;
    try {
      const model = await kube.getModel(ref.namespace, ref.name);
      if (!model || model.metadata.uid !== ref.uid) {
        // Its workflow cancels this rollout; until then, nothing to apply.
        throw fail('Transient', `MachineModel ${ref.namespace}/${ref.name} (uid ${ref.uid}) is gone`);
      }
      refuseDisagreement(ref, model.spec, { revision: input.revision });
      // Built from the spec, not the input: a forged revision carrying other fields (resources) adds nothing.
      const revision = revisionOf(model.spec);
      replicas = withinCeiling(ref, 'replicas', replicas, canaryCeiling(model.spec).replicas);
      const desired = buildCanaryDeployment(ref, model.spec, revision, replicas, build);
      let deployment = await readOurs<V1Deployment>(ref, 'apps/v1', 'Deployment');
      if (!deployment || !isSubset(desired, deployment)) deployment = await kube.apply(desired as V1Deployment);
      const service = buildCanaryService(ref, model.spec, revision);
      const liveService = await readOurs(ref, 'v1', 'Service');
      // The canary of an earlier revision had its share: a new revision starts at none, unjudged, on
      // its Service and on the gateway, before its Pods can take any request.
      const reset = resetsShare(liveService ? liveService.metadata?.labels : null, revision);
      if (reset) {
        await kube.apply(weightDeclaration(ref, 0), weightManager);
        await splitPublishedRoute(deps, ref, model.spec, 0).catch((err: unknown) => {
          throw gatewayFailure(
            err,
            `withdrawing the earlier canary's share of MachineModel ${ref.namespace}/${ref.name}`,
          );
        });
      }
      if (!liveService || !isSubset(service, liveService)) await kube.apply(service as KubernetesObject);
      // Relabelled for this revision: an earlier revision's weight step that landed in between is undone.
      if (reset) await kube.apply(weightDeclaration(ref, 0), weightManager);
      const readiness = readinessOf(deployment);
      if (isReady(readiness)) return { readyReplicas: replicas, desiredReplicas: replicas };
      const trouble = containerTroubles(await kube.listPods(ref.namespace, canaryName(ref.name)));
      return {
        readyReplicas: Math.min(readiness.readyReplicas, replicas - 1),
        desiredReplicas: replicas,
        ...(trouble ? { trouble } : {}),
      };
    } catch (err) {
      throw kubeFailure(err, `applying the canary of MachineModel ${ref.namespace}/${ref.name}`);
    }
  };
}

/**
 * Declares the canary's weight on its Service (the route of every later round is built from it, so
 * the model's own rounds keep the split), then puts the split route on the gateway. Without a
 * gateway the weight is only declared: nothing splits the model's requests.
 */
export function setCanaryWeightActivity(deps: ActivityDeps) {
  const { kube } = deps;
  return async function setCanaryWeight(input: {
    ref: ModelRef;
    weight: number;
    /** The rollout's revision: only its canary's weight is set. */
    revision?: Revision;
  }): Promise<{ changed: boolean }> {
    const { ref, revision } = input;
    const name = canaryName(ref.name);
    let model: MachineModel | undefined;
    try {
      // The model and the Service read again at every try: a 409 means either may have moved on.
      const declared = await onFreshRead(`${ref.namespace}/${name}`, async () => {
        model = await kube.getModel(ref.namespace, ref.name);
        // A model being deleted has no route to split: its workflow unpublished it (a cancelled rollout's
        // last step would otherwise put it back).
        if (!model || model.metadata.uid !== ref.uid || model.metadata.deletionTimestamp) return false;
        const asked = input.weight;
        refuseDisagreement(ref, model.spec, { weight: asked, ...(revision && asked > 0 ? { revision } : {}) });
        const weight = withinCeiling(ref, 'weight', asked, canaryCeiling(model.spec).weight);
        const service = await kube.read('v1', 'Service', ref.namespace, name);
        if (!service) {
          if (weight > 0) throw fail('Transient', `the canary Service ${ref.namespace}/${name} does not exist yet`);
          return true;
        }
        // Another revision's canary (the one that overtook this rollout) keeps its own share.
        if (!isCanaryOf(service.metadata?.labels, revision)) return false;
        await kube.apply(weightDeclaration(ref, weight, revision && service.metadata?.resourceVersion), weightManager);
        return true;
      });
      if (!declared || !model) return { changed: false };
    } catch (err) {
      throw kubeFailure(err, `setting the canary weight of MachineModel ${ref.namespace}/${ref.name}`);
    }
    try {
      // The route takes the share the Service declares now, not the one asked: a newer revision's
      // rollout may have set its own since.
      const share = await canaryWeightOf(kube, ref);
      return { changed: await splitPublishedRoute(deps, ref, model.spec, share) };
    } catch (err) {
      throw gatewayFailure(err, `splitting the route of MachineModel ${ref.namespace}/${ref.name}`);
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

export function removeCanaryActivity({ kube }: ActivityDeps) {
  return async function removeCanary(input: {
    ref: ModelRef;
    /** The rollout's revision: only its canary goes. Without one, whatever canary the model has. */
    revision?: Revision;
  }): Promise<{ removed: boolean }> {
    const { ref, revision } = input;
    const name = canaryName(ref.name);
    let removed = false;
    try {
      for (const [apiVersion, kind] of [
        ['v1', 'Service'],
        ['apps/v1', 'Deployment'],
      ] as const) {
        await onFreshRead(`${kind} ${ref.namespace}/${name}`, async () => {
          const live = await kube.read(apiVersion, kind, ref.namespace, name);
          if (!live || ownershipOf(live as Owned, ref) !== 'ours' || !isCanaryOf(live.metadata?.labels, revision))
            return;
          // As read: a canary relabelled for a newer revision meanwhile is not this one's to remove.
          await kube.delete(live, live.metadata?.uid, revision && live.metadata?.resourceVersion);
          removed = true;
        });
      }
    } catch (err) {
      throw kubeFailure(err, `removing the canary of MachineModel ${ref.namespace}/${ref.name}`);
    }
    return { removed };
  };
}
