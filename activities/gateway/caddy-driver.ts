// Caddy as an external API gateway, driven through its admin API. Each model is one route with a
// stable "@id" (namespace, name and uid), inserted ahead of a catch-all that answers 404. The config
// of a route, and of a canary step's split, is built in caddy-routes.ts.
import { createHash } from 'node:crypto';
import { Mutex } from 'async-mutex';
import type { ModelRef } from '../../src/core/api.js';
import { isSubset } from '../../src/core/desired-state.js';
import { parseRouteId, type ExistingRoute, type RouteBackend, type RouteSpec } from '../../src/core/route-rules.js';
import type { TrafficSample } from '../../src/core/rollout.js';
import { activityCancellation } from '../cancellation.js';
import { serverTraffic } from './caddy-metrics.js';
import {
  caddyRoute,
  caddyTrackServers,
  catchAllId,
  dialsTrackServers,
  insertionIndex,
  prefixOf,
  trackServerName,
  tracks,
  type CaddyRoute,
} from './caddy-routes.js';
import { GatewayUnavailable, type GatewayDriver } from './driver.js';
import { request, type HttpResult } from './http.js';

/** Caddy answers JSON, except for some errors in plain text. */
function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * The admin URL (or a comma-separated list of them) as messages and traffic samples show it: scheme,
 * host and port only. Credentials or a token in its path would otherwise reach workflow histories.
 */
export function shownURL(adminURL: string): string {
  return adminURL
    .split(',')
    .map((one) => {
      try {
        return new URL(one.trim()).origin;
      } catch {
        return '(an admin URL that does not parse)';
      }
    })
    .join(',');
}

export interface CaddyOptions {
  /** Admin API base URL, e.g. http://127.0.0.1:2019. */
  adminURL: string;
  /** Name of the HTTP server (under apps.http.servers) that carries the model routes. */
  server: string;
  /** Address that server listens on, e.g. :8080; used when the driver creates it. */
  listen: string;
  /** Base URL clients use, e.g. https://api.example.com; the path prefix is appended. */
  publicURL: string;
  /**
   * How Caddy reaches a model: by its Service's cluster DNS name (Caddy inside the cluster), or by
   * its Service's cluster IP (Caddy on a node, or on a host that routes the service network, which
   * cannot resolve cluster names). Service DNS when unset.
   */
  upstream?: 'service-dns' | 'cluster-ip';
}

/** Two pieces of Caddy config with the same fields and values, whatever the order of their keys. */
const sameConfig = (a: unknown, b: unknown) => isSubset(a, b) && isSubset(b, a);

/** The shared server speaks plain HTTP: a host matcher must not turn on Caddy's automatic HTTPS there. */
const plainHttp = { disable: true };

export class CaddyDriver implements GatewayDriver {
  readonly kind = 'caddy';

  /**
   * Caddy resets admin requests that are in flight while a config change is applied (measured: 53 of
   * 240 concurrent requests), so this process sends one at a time. Other replicas still may collide;
   * the activity's retry covers that.
   */
  private readonly admin = new Mutex();

  /** Whether this process has seen the shared server's automatic HTTPS off. */
  private plainHttpEnsured = false;

  constructor(
    private readonly opts: CaddyOptions,
    private readonly serviceIP: (namespace: string, name: string) => Promise<string | undefined> = async () =>
      undefined,
  ) {}

  /** One admin API request, one at a time; unreachable is GatewayUnavailable. */
  private async send(method: string, path: string, body?: unknown): Promise<HttpResult> {
    const signal = activityCancellation();
    try {
      return await this.admin.runExclusive(() => request(method, `${this.opts.adminURL}${path}`, body, { signal }));
    } catch (err) {
      // The activity's cancellation, not the gateway's fault.
      if (signal?.aborted) throw signal.reason;
      const code = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
      throw new GatewayUnavailable(`Caddy admin API at ${this.shownURL} is unreachable: ${code}`);
    }
  }

  private async call(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
    const res = await this.send(method, path, body);
    if (res.status >= 500)
      throw new GatewayUnavailable(`Caddy admin API ${method} ${path} answered ${res.status}: ${res.body.trim()}`);
    return { status: res.status, json: parseJson(res.body) };
  }

  /** Like call(), but a refusal (4xx) is an error too. */
  private async change(method: string, path: string, body: unknown, what: string): Promise<void> {
    const res = await this.call(method, path, body);
    if (res.status >= 400) throw new GatewayUnavailable(`Caddy refused to ${what}: ${JSON.stringify(res.json)}`);
  }

  private get routesPath(): string {
    return `/config/apps/http/servers/${this.opts.server}/routes`;
  }

  /** Creates the HTTP server with its catch-all when it is missing; leaves everything else alone. */
  private async ensureServer(): Promise<CaddyRoute[]> {
    const routes = await this.call('GET', this.routesPath);
    if (routes.status === 200 && Array.isArray(routes.json)) return routes.json as CaddyRoute[];
    const server = {
      listen: [this.opts.listen],
      automatic_https: plainHttp,
      routes: [
        {
          '@id': catchAllId,
          handle: [{ handler: 'static_response', status_code: 404, body: 'no model is published at this path\n' }],
        },
      ],
    };
    for (const [path, value] of [
      ['/config/apps', {}],
      ['/config/apps/http', {}],
      ['/config/apps/http/servers', {}],
      [`/config/apps/http/servers/${this.opts.server}`, server],
    ] as const) {
      const existing = await this.call('GET', path);
      if (existing.status === 200 && existing.json !== null && existing.json !== undefined) continue;
      await this.change('PUT', path, value, `create ${path}`);
    }
    return server.routes;
  }

  /** With `upstream: cluster-ip`, the route dials the Service's cluster IP (until it has one, its DNS name). */
  private async addressed(route: RouteSpec): Promise<RouteSpec> {
    if (this.opts.upstream !== 'cluster-ip') return route;
    const address = async (b: RouteBackend): Promise<RouteBackend> => {
      const ip = await this.serviceIP(b.namespace, b.name);
      return ip ? { ...b, host: ip } : b;
    };
    const service = await address(route.service);
    return route.canary
      ? { ...route, service, canary: { ...route.canary, service: await address(route.canary.service) } }
      : { ...route, service };
  }

  async list(): Promise<ExistingRoute[]> {
    const routes = await this.ensureServer();
    return routes.flatMap((r): ExistingRoute[] => {
      if (r['@id'] === catchAllId) return [];
      const prefix = prefixOf(r);
      if (!prefix) return [];
      return [
        {
          id: r['@id'] ?? '(no @id)',
          owner: r['@id'] ? parseRouteId(r['@id']) : undefined,
          pathPrefix: prefix,
          // Caddy answers with its keys sorted: the same route gives the same text on every replica.
          fingerprint: createHash('sha256').update(JSON.stringify(r)).digest('hex').slice(0, 16),
        },
      ];
    });
  }

  async put(route: RouteSpec): Promise<boolean> {
    const addressed = await this.addressed(route);
    const desired = caddyRoute(addressed);
    // A split route's servers exist before the route names them, and go after it stops.
    const servers = caddyTrackServers(addressed);
    let changed = false;
    if (route.canary) {
      await this.ensureMetrics();
      for (const [name, server] of Object.entries(servers)) changed = (await this.putServer(name, server)) || changed;
    }
    if (route.hostnames.length) await this.ensurePlainHttp();
    const current = await this.call('GET', `/id/${route.id}`);
    const live = current.status === 200 ? (current.json as CaddyRoute) : undefined;
    if (live && sameConfig(desired, live)) return changed;
    // Caddy answers with its keys sorted: compared as sets of fields, not as text.
    if (live && sameConfig(desired.match, live.match)) {
      await this.change('PATCH', `/id/${route.id}`, desired, `update route ${route.id}`);
    } else {
      // New, or matching other requests: (re)inserted where its prefix's length puts it.
      if (live) await this.change('DELETE', `/id/${route.id}`, undefined, `move route ${route.id}`);
      const routes = await this.ensureServer();
      await this.change(
        'PUT',
        `${this.routesPath}/${insertionIndex(routes, route.pathPrefix)}`,
        desired,
        `add route ${route.id}`,
      );
    }
    // Only a route that was split has servers to remove: a plain update costs no more admin calls.
    if (live && !route.canary && dialsTrackServers(live)) await this.removeTrackServers(route.id);
    return true;
  }

  /** Turns off automatic HTTPS on the shared server if something (an older operator, a hand) left it on. */
  private async ensurePlainHttp(): Promise<void> {
    // Once per process: the servers the driver creates have it, and Caddy keeps it across --resume.
    if (this.plainHttpEnsured) return;
    const path = `/config/apps/http/servers/${this.opts.server}/automatic_https`;
    const current = await this.call('GET', path);
    const settings = current.status === 200 && current.json && typeof current.json === 'object' ? current.json : {};
    if ((settings as { disable?: boolean }).disable !== true) {
      await this.ensureServer();
      await this.change('POST', path, { ...settings, ...plainHttp }, 'serve the model routes in plain HTTP');
    }
    this.plainHttpEnsured = true;
  }

  async remove(id: string, _owner: ModelRef): Promise<boolean> {
    const res = await this.call('DELETE', `/id/${id}`);
    await this.removeTrackServers(id);
    return res.status < 300;
  }

  /** The canary's requests and 5xx answers since Caddy last loaded its config. */
  async traffic(routeId: string): Promise<TrafficSample> {
    const res = await this.send('GET', '/metrics');
    if (res.status !== 200) throw new GatewayUnavailable(`Caddy's metrics answered ${res.status}`);
    return serverTraffic(res.body, trackServerName(routeId, 'canary'));
  }

  private serverPath(name: string): string {
    return `/config/apps/http/servers/${name}`;
  }

  private async putServer(name: string, server: unknown): Promise<boolean> {
    const current = await this.call('GET', this.serverPath(name));
    if (current.status === 200 && sameConfig(server, current.json)) return false;
    // POST sets the key whether it exists or not.
    await this.change('POST', this.serverPath(name), server, `set server ${name}`);
    return true;
  }

  private async removeTrackServers(routeId: string): Promise<void> {
    for (const t of tracks) {
      const name = trackServerName(routeId, t);
      const current = await this.call('GET', this.serverPath(name));
      if (current.status === 200 && current.json)
        await this.change('DELETE', this.serverPath(name), undefined, `remove server ${name}`);
    }
  }

  /** Caddy counts HTTP requests only with its metrics on (off by default since 2.10). */
  private async ensureMetrics(): Promise<void> {
    const current = await this.call('GET', '/config/apps/http/metrics');
    if (current.status === 200 && current.json) return;
    await this.ensureServer();
    await this.change('POST', '/config/apps/http/metrics', {}, 'turn on HTTP metrics');
  }

  /** Whether this Caddy has the models' server: false for one that started with nothing. */
  async hasServer(): Promise<boolean> {
    const res = await this.call('GET', `/config/apps/http/servers/${this.opts.server}/listen`);
    return res.status === 200 && Array.isArray(res.json);
  }

  /** Every app's config (the models' server, its routes, the canaries' servers, metrics). */
  async apps(): Promise<unknown> {
    const res = await this.call('GET', '/config/apps');
    if (res.status !== 200)
      throw new GatewayUnavailable(`Caddy at ${this.shownURL} answered ${res.status} for its config`);
    return res.json;
  }

  /** Replaces every app's config in one load: Caddy serves the new config whole, or keeps the old. */
  async loadApps(apps: unknown): Promise<void> {
    await this.change('POST', '/config/apps', apps, 'load the config of another replica');
  }

  get adminURL(): string {
    return this.opts.adminURL;
  }

  /** The admin URL without credentials, for messages and samples. */
  get shownURL(): string {
    return shownURL(this.opts.adminURL);
  }

  publicURL(route: RouteSpec): string {
    return `${this.opts.publicURL.replace(/\/+$/, '')}${route.pathPrefix}`;
  }
}
