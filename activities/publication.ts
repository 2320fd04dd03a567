// Publishing models on the API gateway, and removing their routes.
import type { MachineModel, ModelRef } from '../src/core/api.js';
import {
  collisionLosers,
  findConflict,
  gatewayCondition,
  olderFirst,
  prefixesCollide,
  routeId,
  routeSpec,
  wantsRoute,
  type Delegation,
  type ExistingRoute,
  type GatewayCondition,
  type OwnedRoute,
  type RouteSpec,
} from '../src/core/route-rules.js';
import { boundedShare } from './canary.js';
import type { ActivityDeps } from './deps.js';
import { gatewayFailure } from './failure.js';
import { GatewayMisconfigured } from './gateway/driver.js';
import type { ModelSnapshot } from './read-model.js';
import { readDelegation, routeRefusalFor } from './route-refusal.js';

export interface RegisterResult {
  /** False when the operator runs without a gateway: no condition, nothing to clean up. */
  configured: boolean;
  registered: boolean;
  condition?: GatewayCondition;
  url?: string;
  changes: string[];
}

const idOf = (m: MachineModel) =>
  routeId({ namespace: m.metadata.namespace, name: m.metadata.name, uid: m.metadata.uid });

/** The routes whose MachineModel (that uid) still exists, with its creation time. */
function ownedRoutes(routes: ExistingRoute[], models: MachineModel[]): OwnedRoute[] {
  const created = new Map(models.map((m) => [idOf(m), m.metadata.creationTimestamp ?? '']));
  return routes.flatMap((r) =>
    r.owner && created.has(r.id) ? [{ ...r, owner: r.owner, createdAt: created.get(r.id)! }] : [],
  );
}

type Gateway = NonNullable<ActivityDeps['gateway']>;

/**
 * Publishes the model's route, or says why it is not published: publication off, another tenant's
 * URLs or hostnames, a prefix another model holds (before our write, or won in a race with it).
 * Whatever the outcome, no route of ours stays at an old prefix.
 */
export function registerRouteActivity({ gateway, build, kube }: ActivityDeps) {
  /** `canaryShare`: the canary's percent of the requests, as the model's round decided it. */
  return async function registerRoute(snapshot: ModelSnapshot, canaryShare = 0): Promise<RegisterResult> {
    if (!gateway) return { configured: false, registered: false, changes: [] };
    const { ref } = snapshot;
    const changes: string[] = [];
    try {
      const existing = await gateway.list();
      const own = existing.filter((r) => r.owner?.namespace === ref.namespace && r.owner.name === ref.name);
      const asked = await routeOrRefusal(kube, build, snapshot, canaryShare, existing);
      if ('refused' in asked) {
        // Nothing of ours stays published where the model is not.
        await removeOwn(gateway, own, changes);
        return notRegistered(asked.refused, changes);
      }
      // Routes of a previous object of this name, or of an earlier prefix, are replaced.
      await removeOwn(gateway, own, changes, asked.route.id);
      const lost = await publishOrYield(gateway, kube, ref, asked.route, changes);
      if (lost) return notRegistered(lost, changes);
      const url = gateway.publicURL(asked.route);
      return {
        configured: true,
        registered: true,
        url,
        condition: gatewayCondition('True', 'Registered', `published at ${url}`),
        changes,
      };
    } catch (err) {
      if (err instanceof GatewayMisconfigured) {
        return notRegistered(gatewayCondition('False', 'GatewayMisconfigured', err.message), changes);
      }
      throw gatewayFailure(err, `publishing MachineModel ${ref.namespace}/${ref.name} on the gateway`);
    }
  };
}

/** The route the spec asks for, or the condition that says why it gets none. */
async function routeOrRefusal(
  kube: ActivityDeps['kube'],
  build: ActivityDeps['build'],
  { ref, spec }: ModelSnapshot,
  canaryShare: number,
  existing: ExistingRoute[],
): Promise<{ route: RouteSpec } | { refused: GatewayCondition }> {
  if (!wantsRoute(spec)) return { refused: gatewayCondition('False', 'Disabled', 'spec.gateway.enabled is false') };
  const route = routeSpec(ref, spec, build, boundedShare(ref, spec, canaryShare));
  // Another tenant's URLs or hostnames: never published.
  const refusal = await routeRefusalFor(route, readDelegation(kube));
  if (refusal) return { refused: gatewayCondition('False', refusal.reason, refusal.message) };
  // Never published over another model's traffic.
  const conflict = findConflict(route, existing);
  if (conflict.kind === 'taken') {
    const message = `path prefix ${route.pathPrefix} collides with ${conflict.by}; choose another spec.gateway.pathPrefix`;
    return { refused: gatewayCondition('False', 'PathConflict', message) };
  }
  return { route };
}

/** Removes the model's routes on the gateway, but `keep`. */
async function removeOwn(gateway: Gateway, own: ExistingRoute[], changes: string[], keep?: string): Promise<void> {
  for (const r of own) {
    if (r.id !== keep && r.owner && (await gateway.remove(r.id, r.owner))) changes.push(`route ${r.id} removed`);
  }
}

/**
 * Puts the route; when that changed it, gives way to an older model that published a colliding
 * prefix between our check and our write. The PathConflict condition when it gave way.
 */
async function publishOrYield(
  gateway: Gateway,
  kube: ActivityDeps['kube'],
  ref: ModelRef,
  route: RouteSpec,
  changes: string[],
): Promise<GatewayCondition | undefined> {
  if (!(await gateway.put(route))) return undefined;
  changes.push(`route ${route.pathPrefix} published`);
  const winner = await raceWinner(gateway, kube, route);
  if (!winner) return undefined;
  if (await gateway.remove(route.id, ref)) changes.push(`route ${route.id} withdrawn`);
  const message = `path prefix ${route.pathPrefix} collides with MachineModel ${winner.namespace}/${winner.name}, published at the same time and older; choose another spec.gateway.pathPrefix`;
  return gatewayCondition('False', 'PathConflict', message);
}

/** After a write: the older model whose colliding route appeared meanwhile, if ours must give way to it. */
async function raceWinner(
  gateway: Gateway,
  kube: ActivityDeps['kube'],
  route: RouteSpec,
): Promise<ModelRef | undefined> {
  const rivals = (await gateway.list()).filter(
    (r) =>
      r.id === route.id ||
      (r.owner &&
        (r.owner.namespace !== route.namespace || r.owner.name !== route.name) &&
        prefixesCollide(r.pathPrefix, route.pathPrefix)),
  );
  if (rivals.length < 2) return undefined;
  const models = (await Promise.all(rivals.map((r) => kube.getModel(r.owner!.namespace, r.owner!.name)))).filter(
    (m) => m !== undefined,
  );
  const owned = ownedRoutes(rivals, models);
  if (!collisionLosers(owned).some((r) => r.id === route.id)) return undefined;
  return owned.filter((r) => r.id !== route.id).sort(olderFirst)[0]?.owner;
}

function notRegistered(condition: GatewayCondition, changes: string[]): RegisterResult {
  return { configured: true, registered: false, condition, changes };
}

export function unregisterRouteActivity({ gateway }: ActivityDeps) {
  return async function unregisterRoute(ref: ModelRef): Promise<{ removed: boolean }> {
    if (!gateway) return { removed: false };
    try {
      return { removed: await gateway.remove(routeId(ref), ref) };
    } catch (err) {
      throw gatewayFailure(err, `removing the gateway route of MachineModel ${ref.namespace}/${ref.name}`);
    }
  };
}

export interface GatewayInspection {
  /** Routes of ours whose MachineModel (that namespace, name and uid) no longer exists. */
  orphans: ExistingRoute[];
  /** Routes of younger models that collide with an older model's: both passed the check at once. */
  collisions: OwnedRoute[];
  /**
   * Models whose workflows should look again: published by their status but missing on the gateway
   * (a gateway that restarted with its routes in memory, or someone removed one), or refused for a
   * path conflict that has since gone away.
   */
  unpublished: { namespace: string; name: string }[];
}

const registeredCondition = (m: MachineModel) => m.status?.conditions?.find((c) => c.type === 'GatewayRegistered');

/** Compares the gateway with the models: one listing of each. */
export function inspectGatewayActivity({ gateway, kube, build }: ActivityDeps) {
  return async function inspectGateway(): Promise<GatewayInspection> {
    if (!gateway) return { orphans: [], collisions: [], unpublished: [] };
    try {
      const routes = await gateway.list();
      const models = await kube.listModels();
      const liveIds = new Set(models.map(idOf));
      const onGateway = new Set(routes.filter((r) => !r.incomplete).map((r) => r.id));
      // On some replicas only, or not the same on each: its model's round publishes or removes it again.
      const incomplete = new Set(routes.filter((r) => r.incomplete).map((r) => r.id));
      const collisions = collisionLosers(ownedRoutes(routes, models));
      const lost = new Set(collisions.map((r) => r.id));
      // What still holds a prefix: others' routes, and ours that neither lost a collision nor outlived their model.
      const standing = routes.filter((r) => !lost.has(r.id) && (!r.owner || liveIds.has(r.id)));
      // Each Namespace read at most once a sweep, and only for models refused by its delegation.
      const delegations = new Map<string, Promise<Delegation>>();
      const read = readDelegation(kube);
      const delegationIn = (namespace: string) => {
        if (!delegations.has(namespace)) delegations.set(namespace, read(namespace));
        return delegations.get(namespace)!;
      };
      const looksAgain = async (m: MachineModel): Promise<boolean> => {
        const c = registeredCondition(m);
        if (c?.status === 'True' || incomplete.has(idOf(m))) return !onGateway.has(idOf(m));
        if (!wantsRoute(m.spec)) return false;
        const ref = { namespace: m.metadata.namespace, name: m.metadata.name, uid: m.metadata.uid };
        const route = routeSpec(ref, m.spec, build);
        // An administrator may have delegated the prefix or hostname since.
        if (c?.reason === 'PathNotAllowed' || c?.reason === 'HostnameNotAllowed')
          return (await routeRefusalFor(route, delegationIn)) === undefined;
        return c?.reason === 'PathConflict' && findConflict(route, standing).kind === 'none';
      };
      const live = models.filter((m) => !m.metadata.deletionTimestamp);
      const again = await Promise.all(live.map(looksAgain));
      return {
        orphans: routes.filter((r) => r.owner && !liveIds.has(r.id)),
        collisions,
        unpublished: live
          .filter((_, i) => again[i])
          .map((m) => ({ namespace: m.metadata.namespace, name: m.metadata.name })),
      };
    } catch (err) {
      throw gatewayFailure(err, 'comparing the gateway routes with the MachineModels');
    }
  };
}

/** Withdraws a route that lost a collision, after checking once more that it still loses. */
export function removeCollidingRouteActivity({ gateway, kube }: ActivityDeps) {
  return async function removeCollidingRoute(route: OwnedRoute): Promise<{ removed: boolean }> {
    if (!gateway) return { removed: false };
    try {
      const losers = collisionLosers(ownedRoutes(await gateway.list(), await kube.listModels()));
      if (!losers.some((r) => r.id === route.id)) return { removed: false };
      return { removed: await gateway.remove(route.id, route.owner) };
    } catch (err) {
      throw gatewayFailure(err, `withdrawing the colliding route ${route.id}`);
    }
  };
}

/** Removes an orphan route after checking once more that its model is really gone. */
export function removeOrphanRouteActivity({ gateway, kube }: ActivityDeps) {
  return async function removeOrphanRoute(route: ExistingRoute): Promise<{ removed: boolean }> {
    if (!gateway || !route.owner) return { removed: false };
    try {
      const model = await kube.getModel(route.owner.namespace, route.owner.name);
      if (model && model.metadata.uid === route.owner.uid) return { removed: false };
      return { removed: await gateway.remove(route.id, route.owner) };
    } catch (err) {
      throw gatewayFailure(err, `removing the orphan route ${route.id}`);
    }
  };
}
