// Publishing models on the API gateway, and removing their routes.
import { ApplicationFailure } from '@temporalio/common';
import type { Condition, ModelRef } from '../src/api.js';
import { findConflict, routeId, routeSpec, wantsRoute, type ExistingRoute } from '../src/gateway-route.js';
import type { ActivityDeps } from './deps.js';
import { GatewayMisconfigured } from './gateway/driver.js';
import type { ModelSnapshot } from './read-model.js';

export type GatewayCondition = Omit<Condition, 'lastTransitionTime'>;

export interface RegisterResult {
  /** False when the operator runs without a gateway: no condition, nothing to clean up. */
  configured: boolean;
  registered: boolean;
  condition?: GatewayCondition;
  url?: string;
  changes: string[];
}

const condition = (status: Condition['status'], reason: string, message: string): GatewayCondition => ({
  type: 'GatewayRegistered',
  status,
  reason,
  message,
});

/** Gateway outages are retryable; configuration problems become a condition instead. */
function rethrow(err: unknown): never {
  if (err instanceof GatewayMisconfigured) throw ApplicationFailure.nonRetryable(err.message, 'GatewayMisconfigured');
  throw ApplicationFailure.retryable(err instanceof Error ? err.message : String(err), 'GatewayUnavailable');
}

export function registerRouteActivity({ gateway, build }: ActivityDeps) {
  return async function registerRoute(snapshot: ModelSnapshot): Promise<RegisterResult> {
    if (!gateway) return { configured: false, registered: false, changes: [] };
    const { ref, spec } = snapshot;
    const changes: string[] = [];
    try {
      const existing = await gateway.list();
      const own = existing.filter((r) => r.owner?.namespace === ref.namespace && r.owner.name === ref.name);
      const removeOwn = async (keep?: string) => {
        for (const r of own) {
          if (r.id !== keep && r.owner && (await gateway.remove(r.id, r.owner))) changes.push(`route ${r.id} removed`);
        }
      };
      if (!wantsRoute(spec)) {
        await removeOwn();
        return { configured: true, registered: false, condition: condition('False', 'Disabled', 'spec.gateway.enabled is false'), changes };
      }
      const route = routeSpec(ref, spec, build);
      const conflict = findConflict(route, existing);
      if (conflict.kind === 'taken') {
        // Never publish over another model's traffic; our own older routes go too, so nothing stale stays.
        await removeOwn();
        const message = `path prefix ${route.pathPrefix} collides with ${conflict.by}; choose another spec.gateway.pathPrefix`;
        return { configured: true, registered: false, condition: condition('False', 'PathConflict', message), changes };
      }
      // Routes of a previous object of this name, or of an earlier prefix, are replaced.
      await removeOwn(route.id);
      if (await gateway.put(route)) changes.push(`route ${route.pathPrefix} published`);
      const url = gateway.publicURL(route);
      return { configured: true, registered: true, url, condition: condition('True', 'Registered', `published at ${url}`), changes };
    } catch (err) {
      if (err instanceof GatewayMisconfigured) {
        return { configured: true, registered: false, condition: condition('False', 'GatewayMisconfigured', err.message), changes };
      }
      rethrow(err);
    }
  };
}

export function unregisterRouteActivity({ gateway }: ActivityDeps) {
  return async function unregisterRoute(ref: ModelRef): Promise<{ removed: boolean }> {
    if (!gateway) return { removed: false };
    try {
      return { removed: await gateway.remove(routeId(ref), ref) };
    } catch (err) {
      rethrow(err);
    }
  };
}

export interface GatewayInspection {
  /** Routes of ours whose MachineModel (that namespace, name and uid) no longer exists. */
  orphans: ExistingRoute[];
  /**
   * Models whose status says they are published but whose route is not on the gateway (a gateway
   * restarted with its routes in memory, or someone removed one): their workflows should look again.
   */
  unpublished: { namespace: string; name: string }[];
}

/** Compares the gateway with the models: one listing of each. */
export function inspectGatewayActivity({ gateway, kube }: ActivityDeps) {
  return async function inspectGateway(): Promise<GatewayInspection> {
    if (!gateway) return { orphans: [], unpublished: [] };
    try {
      const routes = await gateway.list();
      const models = await kube.listModels();
      const liveIds = new Set(models.map((m) => routeId({ namespace: m.metadata.namespace, name: m.metadata.name, uid: m.metadata.uid })));
      const onGateway = new Set(routes.map((r) => r.id));
      return {
        orphans: routes.filter((r) => r.owner && !liveIds.has(r.id)),
        unpublished: models
          .filter((m) => !m.metadata.deletionTimestamp && m.status?.conditions?.some((c) => c.type === 'GatewayRegistered' && c.status === 'True'))
          .filter((m) => !onGateway.has(routeId({ namespace: m.metadata.namespace, name: m.metadata.name, uid: m.metadata.uid })))
          .map((m) => ({ namespace: m.metadata.namespace, name: m.metadata.name })),
      };
    } catch (err) {
      rethrow(err);
    }
  };
}

/** Removes an orphan route after checking once more that its model is really gone. */
export function removeOrphanRouteActivity({ gateway, kube }: ActivityDeps) {
  return async function removeOrphanRoute(route: ExistingRoute): Promise<{ removed: boolean }> {
    if (!gateway || !route.owner) return { removed: false };
    const model = await kube.getModel(route.owner.namespace, route.owner.name);
    if (model && model.metadata.uid === route.owner.uid) return { removed: false };
    try {
      return { removed: await gateway.remove(route.id, route.owner) };
    } catch (err) {
      rethrow(err);
    }
  };
}

