// Kubernetes Gateway API: one HTTPRoute per model, in the model's namespace, attached to a configured
// parent Gateway. Works with any Gateway API implementation.
import { CancelledFailure } from '@temporalio/common';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  apiVersion as modelApiVersion,
  childSelector,
  isModelController,
  kind as modelKind,
  routeIdAnnotation,
  type ModelRef,
} from '../../src/core/api.js';
import { childLabels, isSubset } from '../../src/core/desired-state.js';
import { parseRouteId, routeId, type ExistingRoute, type RouteSpec } from '../../src/core/route-rules.js';
import { ownershipOf } from '../../src/core/ownership.js';
import { apiMessage, apiStatus } from '../../src/process/kube-errors.js';
import type { KubeClient } from '../kube-client.js';
import { GatewayMisconfigured, GatewayUnavailable, type GatewayDriver } from './driver.js';

const routeApiVersion = 'gateway.networking.k8s.io/v1';

export interface GatewayApiOptions {
  parent: { namespace: string; name: string; sectionName?: string };
  publicURL: string;
}

interface HTTPRoute extends KubernetesObject {
  spec?: {
    parentRefs?: { name: string; namespace?: string }[];
    rules?: { matches?: { path?: { value?: string } }[] }[];
  };
}

/** The name of a model's HTTPRoute: the model's own, in the model's namespace. */
export function httpRouteName(model: Pick<ModelRef, 'name'>): string {
  return model.name;
}

/** What the ownership rule reads of an HTTPRoute. */
export interface RouteMetadata {
  metadata?: {
    namespace?: string;
    name?: string;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
  };
}

/**
 * Whether an HTTPRoute is this model's route. Whoever may create HTTPRoutes in any namespace can copy
 * our label and route-id annotation, so they do not count; all three of these must hold: the model's
 * namespace, the name the operator gives its route, and a controller ownerReference to the model's uid.
 */
export function isModelRoute(route: RouteMetadata | undefined, model: ModelRef): boolean {
  const m = route?.metadata;
  if (!m || m.namespace !== model.namespace || m.name !== httpRouteName(model)) return false;
  const controller = m.ownerReferences?.find((o) => o.controller);
  return (
    !!controller && isModelController(controller) && controller.uid === model.uid && controller.name === model.name
  );
}

/**
 * The MachineModel an HTTPRoute belongs to, or undefined when it is not the operator's (foreign). The
 * route-id annotation only names the candidate; isModelRoute decides.
 */
export function routeOwner(route: RouteMetadata): ModelRef | undefined {
  const id = route.metadata?.annotations?.[routeIdAnnotation];
  const candidate = id ? parseRouteId(id) : undefined;
  return candidate && isModelRoute(route, candidate) ? candidate : undefined;
}

export function httpRoute(route: RouteSpec, parent: GatewayApiOptions['parent']) {
  return {
    apiVersion: routeApiVersion,
    kind: 'HTTPRoute',
    metadata: {
      name: httpRouteName(route),
      namespace: route.namespace,
      labels: childLabels(route.name),
      annotations: { [routeIdAnnotation]: route.id },
      ownerReferences: [
        {
          apiVersion: modelApiVersion,
          kind: modelKind,
          name: route.name,
          uid: route.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      parentRefs: [
        {
          group: 'gateway.networking.k8s.io',
          kind: 'Gateway',
          name: parent.name,
          namespace: parent.namespace,
          ...(parent.sectionName ? { sectionName: parent.sectionName } : {}),
        },
      ],
      ...(route.hostnames.length ? { hostnames: route.hostnames } : {}),
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: route.pathPrefix } }],
          filters: [
            { type: 'URLRewrite', urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/' } } },
          ],
          backendRefs: route.canary
            ? [
                { name: route.service.name, port: route.service.port, weight: 100 - route.canary.weight },
                { name: route.canary.service.name, port: route.canary.service.port, weight: route.canary.weight },
              ]
            : [{ name: route.service.name, port: route.service.port }],
        },
      ],
    },
  };
}

export class GatewayApiDriver implements GatewayDriver {
  readonly kind = 'gateway-api';

  constructor(
    private readonly kube: KubeClient,
    private readonly opts: GatewayApiOptions,
  ) {}

  private unavailable(err: unknown, action: string): Error {
    // The activity's worker stopping, not the gateway: it stays a cancellation.
    if (err instanceof CancelledFailure) return err;
    if (apiStatus(err) === 404)
      return new GatewayMisconfigured(`${action}: the Gateway API CRDs are not installed (${apiMessage(err)})`);
    if (apiStatus(err) === 403) {
      return new GatewayMisconfigured(
        `${action}: ${apiMessage(err)} (grant the operator's ServiceAccount this permission)`,
      );
    }
    return new GatewayUnavailable(`${action}: ${apiMessage(err)}`);
  }

  async list(): Promise<ExistingRoute[]> {
    let items: HTTPRoute[];
    try {
      const list = await this.kube.objects.list<HTTPRoute>(
        routeApiVersion,
        'HTTPRoute',
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        childSelector,
      );
      items = list.items;
    } catch (err) {
      throw this.unavailable(err, 'listing HTTPRoutes');
    }
    const { namespace, name } = this.opts.parent;
    return (
      items
        .filter((r) =>
          r.spec?.parentRefs?.some((p) => p.name === name && (p.namespace ?? r.metadata?.namespace) === namespace),
        )
        // Selected by our label, which anyone may copy: a route that is not ours by namespace, name and
        // controller is a forgery, left to the Gateway's own precedence (it can neither block a model's
        // prefix nor stand in for its route).
        .flatMap((r) => {
          const owner = routeOwner(r);
          return owner
            ? [{ id: routeId(owner), owner, pathPrefix: r.spec?.rules?.[0]?.matches?.[0]?.path?.value ?? '/' }]
            : [];
        })
    );
  }

  async put(route: RouteSpec): Promise<boolean> {
    const { namespace, name } = this.opts.parent;
    const parent = await this.kube
      .read('gateway.networking.k8s.io/v1', 'Gateway', namespace, name)
      .catch((err: unknown) => {
        throw this.unavailable(err, `reading Gateway ${namespace}/${name}`);
      });
    if (!parent)
      throw new GatewayMisconfigured(
        `the parent Gateway ${namespace}/${name} does not exist; create it or point --gateway-parent at an existing one`,
      );
    const desired = httpRoute(route, this.opts.parent);
    const routeName = httpRouteName(route);
    const live = await this.kube
      .read<HTTPRoute>(routeApiVersion, 'HTTPRoute', route.namespace, routeName)
      .catch((err: unknown) => {
        throw this.unavailable(err, `reading HTTPRoute ${route.namespace}/${routeName}`);
      });
    if (ownershipOf(live as Parameters<typeof ownershipOf>[0], route) === 'foreign') {
      throw new GatewayMisconfigured(
        `HTTPRoute ${route.namespace}/${routeName} exists and is not owned by this MachineModel`,
      );
    }
    if (live && isSubset(desired, live)) return false;
    await this.kube.apply(desired).catch((err: unknown) => {
      throw this.unavailable(err, `applying HTTPRoute ${route.namespace}/${routeName}`);
    });
    return true;
  }

  async remove(id: string, owner: ModelRef): Promise<boolean> {
    const name = httpRouteName(owner);
    const live = await this.kube
      .read<HTTPRoute>(routeApiVersion, 'HTTPRoute', owner.namespace, name)
      .catch((err: unknown) => {
        throw this.unavailable(err, `reading HTTPRoute ${owner.namespace}/${name}`);
      });
    // Re-checked on the object itself: never delete a route that only looks like this model's.
    const actual = live && routeOwner(live);
    const uid = live?.metadata?.uid;
    if (!actual || !uid || routeId(actual) !== id || id !== routeId(owner)) return false;
    // The uid precondition: if the route was replaced since it was read, the apiserver refuses.
    await this.kube.delete(live, uid).catch((err: unknown) => {
      throw this.unavailable(err, `deleting HTTPRoute ${owner.namespace}/${name}`);
    });
    return true;
  }

  publicURL(route: RouteSpec): string {
    return `${this.opts.publicURL.replace(/\/+$/, '')}${route.pathPrefix}`;
  }
}
