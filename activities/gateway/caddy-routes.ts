// A model's route as Caddy's JSON config, where it goes among the others, and, during a canary step,
// the two small servers of Caddy's own its weighted split goes through, one per revision, listening
// on abstract Unix sockets: Caddy's metrics count requests per server (not per upstream), so this is
// how the gateway tells the canary's answers from the stable revision's.
import { createHash } from 'node:crypto';
import { matchedPrefix, routeIdPrefix, type RouteBackend, type RouteSpec } from '../../src/core/route-rules.js';

export interface CaddyRoute {
  '@id'?: string;
  match?: { path?: string[]; host?: string[] }[];
  handle?: unknown[];
  terminal?: boolean;
}

export const catchAllId = `${routeIdPrefix}-catch-all`;

/**
 * A request whose connection is refused (a Pod going away that the node's service rules still name)
 * is dialled again for a while instead of answered 502. Caddy retries only what never reached a backend.
 */
const dialRetry = { try_duration: '5s', try_interval: '250ms' };

export type Track = 'stable' | 'canary';
export const tracks: Track[] = ['stable', 'canary'];

/** The Caddy server that carries one revision's share of a split route; its name labels its metrics. */
export function trackServerName(routeId: string, track: Track): string {
  return `${routeId}-${track}`;
}

const trackSocketPrefix = 'unix/@mmo-';

/** An abstract Unix socket (no file, no port to pick): Linux only, like the cluster Caddy runs on. */
function trackSocket(routeId: string, track: Track): string {
  const hash = createHash('sha256').update(routeId).digest('hex').slice(0, 16);
  return `${trackSocketPrefix}${hash}-${track}`;
}

const grpcTransport = { protocol: 'http', versions: ['h2c', '2'] };

function proxyTo(dials: string[], route: RouteSpec, weights?: number[]): Record<string, unknown> {
  return {
    handler: 'reverse_proxy',
    upstreams: dials.map((dial) => ({ dial })),
    load_balancing: weights
      ? { selection_policy: { policy: 'weighted_round_robin', weights }, ...dialRetry }
      : dialRetry,
    ...(route.protocol === 'grpc' ? { transport: grpcTransport } : {}),
  };
}

const dialOf = (b: RouteBackend) => `${b.host}:${b.port}`;

/** Whether a route on Caddy splits its requests through track servers. */
export function dialsTrackServers(route: unknown): boolean {
  return JSON.stringify(route ?? null).includes(`"${trackSocketPrefix}`);
}

export function caddyRoute(route: RouteSpec): CaddyRoute {
  const match: { path: string[]; host?: string[] } = { path: [route.pathPrefix, `${route.pathPrefix}/*`] };
  if (route.hostnames.length) match.host = route.hostnames;
  const proxy = route.canary
    ? proxyTo(
        tracks.map((t) => trackSocket(route.id, t)),
        route,
        [100 - route.canary.weight, route.canary.weight],
      )
    : proxyTo([dialOf(route.service)], route);
  return {
    '@id': route.id,
    match: [match],
    handle: [{ handler: 'rewrite', strip_path_prefix: route.pathPrefix }, proxy],
    terminal: true,
  };
}

/** During a canary step: the two servers the route splits its requests between, by name. */
export function caddyTrackServers(route: RouteSpec): Record<string, unknown> {
  if (!route.canary) return {};
  const backends: Record<Track, RouteBackend> = { stable: route.service, canary: route.canary.service };
  return Object.fromEntries(
    tracks.map((t) => [
      trackServerName(route.id, t),
      {
        listen: [trackSocket(route.id, t)],
        automatic_https: { disable: true },
        ...(route.protocol === 'grpc' ? { protocols: ['h1', 'h2c'] } : {}),
        routes: [{ handle: [proxyTo([dialOf(backends[t])], route)] }],
      },
    ]),
  );
}

/** A route's path prefix as the operator wrote it; undefined for routes without a path matcher. */
export function prefixOf(route: CaddyRoute): string | undefined {
  return route.match?.[0]?.path?.[0]?.replace(/\/\*$/, '');
}

/**
 * Where a new route goes: ahead of the first route with a shorter prefix, a route without a path
 * (the catch-all), so that Caddy, which takes the first match, tries the most specific prefix first
 * whatever order the models came in.
 */
export function insertionIndex(routes: CaddyRoute[], prefix: string): number {
  const length = matchedPrefix(prefix).length;
  const i = routes.findIndex((r) => {
    const p = prefixOf(r);
    return p === undefined || matchedPrefix(p).length < length;
  });
  return i === -1 ? routes.length : i;
}
