// The gateway route a MachineModel should have, and how routes of different models may collide. Pure.
import type { Condition, MachineModelSpec, ModelRef } from './api.js';
import { canaryName } from './canary-state.js';
import { withDefaults, type BuildOptions } from './desired-state.js';

export type GatewayCondition = Omit<Condition, 'lastTransitionTime'>;

/** The model's GatewayRegistered condition, as the activities and the workflow both report it. */
export function gatewayCondition(status: Condition['status'], reason: string, message: string): GatewayCondition {
  return { type: 'GatewayRegistered', status, reason, message };
}

/** What any gateway driver needs to publish one model. */
export interface RouteSpec {
  /** Stable identity on the gateway, derived from namespace, name and uid: a recreated model gets a new one. */
  id: string;
  namespace: string;
  name: string;
  uid: string;
  pathPrefix: string;
  hostnames: string[];
  /** In-cluster Service backing the route. */
  service: RouteBackend;
  /** During a canary step: the canary's Service and its percent of the requests (the stable Service has the rest). */
  canary?: { service: RouteBackend; weight: number };
  /** gRPC needs HTTP/2 to the upstream. */
  protocol: 'http' | 'grpc';
}

export interface RouteBackend {
  name: string;
  namespace: string;
  port: number;
  host: string;
}

export const routeIdPrefix = 'machinemodel';

export function routeId(ref: ModelRef): string {
  return `${routeIdPrefix}.${ref.namespace}.${ref.name}.${ref.uid}`;
}

/** Namespace, name and uid of a route id made by routeId; undefined for anyone else's routes. */
export function parseRouteId(id: string): ModelRef | undefined {
  const parts = id.split('.');
  if (parts.length !== 4 || parts[0] !== routeIdPrefix) return undefined;
  const [, namespace, name, uid] = parts as [string, string, string, string];
  return namespace && name && uid ? { namespace, name, uid } : undefined;
}

export function defaultPathPrefix(ref: Pick<ModelRef, 'namespace' | 'name'>): string {
  return `/models/${ref.namespace}/${ref.name}`;
}

/** Without a trailing slash (except the root), so /a and /a/ are the same prefix. */
export function normalizePrefix(prefix: string): string {
  return prefix.length > 1 ? prefix.replace(/\/+$/, '') : prefix;
}

/**
 * A prefix as a gateway may match it: Caddy's path matcher ignores letter case, so /Models and
 * /models are one prefix. Gateway API matches case-sensitively; folding there too refuses a little
 * more, never less.
 */
export function matchedPrefix(prefix: string): string {
  return normalizePrefix(prefix).toLowerCase();
}

/** Whether `prefix` is `outer` or lies under it, by whole path segments, as a gateway matches them. */
export function prefixWithin(prefix: string, outer: string): boolean {
  const p = matchedPrefix(prefix);
  const o = matchedPrefix(outer);
  return p === o || o === '/' || p.startsWith(`${o}/`);
}

/**
 * Two prefixes collide when one routes requests the other expects: equal, or one is a path-segment
 * prefix of the other (/models/a swallows /models/a/b, but not /models/ab), letter case ignored.
 */
export function prefixesCollide(a: string, b: string): boolean {
  return prefixWithin(a, b) || prefixWithin(b, a);
}

/**
 * What a cluster administrator lets one namespace's models claim on the shared gateway beyond
 * `/models/<namespace>/`: annotations on the Namespace, a cluster-scoped object tenants cannot edit.
 */
export const delegatedPrefixesAnnotation = 'gateway.stable.example.com/path-prefixes';
export const delegatedHostnamesAnnotation = 'gateway.stable.example.com/hostnames';

export interface Delegation {
  /** Prefixes (and everything under them) the namespace's models may use. */
  pathPrefixes: string[];
  /** Hostnames the namespace's models may match on; `*.example.com` allows its subdomains. */
  hostnames: string[];
}

const listOf = (value: string | undefined) =>
  (value ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter(Boolean);

/** The delegation a Namespace's annotations grant; none when unannotated. */
export function delegationOf(annotations: Record<string, string> | undefined): Delegation {
  return {
    pathPrefixes: listOf(annotations?.[delegatedPrefixesAnnotation]).filter((p) => p.startsWith('/')),
    hostnames: listOf(annotations?.[delegatedHostnamesAnnotation]).map((h) => h.toLowerCase()),
  };
}

const modelsRoot = '/models';

/** Where every namespace's models may publish without a delegation. */
export function namespacePrefix(namespace: string): string {
  return `${modelsRoot}/${namespace}`;
}

/** Whether the route asks for more than its namespace owns, so its Namespace's delegation must be read. */
export function needsDelegation(route: Pick<RouteSpec, 'namespace' | 'pathPrefix' | 'hostnames'>): boolean {
  const own = matchedPrefix(namespacePrefix(route.namespace));
  return !matchedPrefix(route.pathPrefix).startsWith(`${own}/`) || route.hostnames.length > 0;
}

function hostnameAllowed(host: string, allowed: string[]): boolean {
  const h = host.toLowerCase();
  return allowed.some((a) => a === h || (a.startsWith('*.') && h.endsWith(a.slice(1))));
}

/**
 * Why a route may not be published for its namespace, or undefined when it may: its prefix must lie
 * strictly under /models/<namespace>/ or under a prefix the Namespace delegates outside /models, and each hostname
 * must be one the Namespace delegates. A tenant cannot take another namespace's URLs, nor the root.
 */
export function routeRefusal(
  route: Pick<RouteSpec, 'namespace' | 'pathPrefix' | 'hostnames'>,
  delegation: Delegation,
): { reason: 'PathNotAllowed' | 'HostnameNotAllowed'; message: string } | undefined {
  const own = namespacePrefix(route.namespace);
  const underOwn = matchedPrefix(route.pathPrefix).startsWith(`${matchedPrefix(own)}/`);
  // /models/<namespace>/ belongs to each namespace: no delegation (of /, of /models) reaches into another's.
  const delegable = !prefixesCollide(route.pathPrefix, modelsRoot);
  if (!underOwn && !(delegable && delegation.pathPrefixes.some((d) => prefixWithin(route.pathPrefix, d)))) {
    return {
      reason: 'PathNotAllowed',
      message: `path prefix ${route.pathPrefix} is outside ${own}/ and not delegated to namespace ${route.namespace}; a cluster administrator may delegate it with the Namespace annotation ${delegatedPrefixesAnnotation}`,
    };
  }
  const refused = route.hostnames.filter((h) => !hostnameAllowed(h, delegation.hostnames));
  if (refused.length) {
    return {
      reason: 'HostnameNotAllowed',
      message: `hostnames ${refused.join(', ')} are not delegated to namespace ${route.namespace}; a cluster administrator may delegate them with the Namespace annotation ${delegatedHostnamesAnnotation}`,
    };
  }
  return undefined;
}

export function wantsRoute(spec: MachineModelSpec): boolean {
  return spec.gateway?.enabled ?? true;
}

/** The model's route; with a canary weight above 0, split between the stable and canary Services. */
export function routeSpec(ref: ModelRef, spec: MachineModelSpec, opts: BuildOptions, canaryWeight = 0): RouteSpec {
  const s = withDefaults(spec);
  const port = s.endpointType === 'gRPC' ? 9000 : 80;
  const backend = (name: string): RouteBackend => ({
    name,
    namespace: ref.namespace,
    port,
    host: `${name}.${ref.namespace}.svc.${opts.clusterDomain}`,
  });
  return {
    id: routeId(ref),
    namespace: ref.namespace,
    name: ref.name,
    uid: ref.uid,
    pathPrefix: normalizePrefix(spec.gateway?.pathPrefix ?? defaultPathPrefix(ref)),
    hostnames: [...(spec.gateway?.hostnames ?? [])].sort(),
    service: backend(ref.name),
    ...(canaryWeight > 0 ? { canary: { service: backend(canaryName(ref.name)), weight: canaryWeight } } : {}),
    protocol: s.endpointType === 'gRPC' ? 'grpc' : 'http',
  };
}

/** A route already on the gateway, as a driver lists it. */
export interface ExistingRoute {
  id: string;
  owner?: ModelRef;
  pathPrefix: string;
  /** On some replicas of the gateway only, or not the same on each: its model publishes it again. */
  incomplete?: boolean;
  /** The route's config as the gateway holds it, hashed: compared across a gateway's replicas. */
  fingerprint?: string;
}

export type RouteConflict = { kind: 'none' } | { kind: 'taken'; by: string };

/**
 * Whether `wanted` may be published next to the routes that exist. Routes of the same model
 * (any uid: a previous object of this name is gone) never conflict; they are replaced.
 */
export function findConflict(wanted: RouteSpec, existing: ExistingRoute[]): RouteConflict {
  for (const r of existing) {
    if (r.owner && r.owner.namespace === wanted.namespace && r.owner.name === wanted.name) continue;
    if (prefixesCollide(r.pathPrefix, wanted.pathPrefix)) {
      const by = r.owner ? `MachineModel ${r.owner.namespace}/${r.owner.name}` : `route ${r.id}`;
      return { kind: 'taken', by };
    }
  }
  return { kind: 'none' };
}

/** A route of ours with the creation time of the model that owns it. */
export interface OwnedRoute extends ExistingRoute {
  owner: ModelRef;
  /** The owning MachineModel's metadata.creationTimestamp. */
  createdAt: string;
}

/** Oldest model first; the uid breaks ties of one second, the same way on every replica. */
export function olderFirst(a: OwnedRoute, b: OwnedRoute): number {
  return a.createdAt.localeCompare(b.createdAt) || a.owner.uid.localeCompare(b.owner.uid);
}

/**
 * Routes that lost a collision. Two models can both pass the check before publishing (check, then
 * act): then the oldest model keeps its prefix, as Gateway API's own precedence rule says, and the
 * routes of younger models that collide with a kept route lose.
 */
export function collisionLosers(routes: OwnedRoute[]): OwnedRoute[] {
  const byAge = [...routes].sort(olderFirst);
  const kept: OwnedRoute[] = [];
  const losers: OwnedRoute[] = [];
  for (const r of byAge) {
    const sameModel = (k: OwnedRoute) => k.owner.namespace === r.owner.namespace && k.owner.name === r.owner.name;
    if (kept.some((k) => !sameModel(k) && prefixesCollide(k.pathPrefix, r.pathPrefix))) losers.push(r);
    else kept.push(r);
  }
  return losers;
}
