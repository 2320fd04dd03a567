// Caddy on several replicas: each holds its routes in its own memory, so the operator publishes every
// change to every replica it finds. The admin URL names them all: a name that resolves to each
// replica's address (a headless Service) or a comma-separated list.
//
// A replica that starts with nothing (a new Pod) is given a running replica's whole config in one
// load before anything else; a route one replica lacks is listed as incomplete, and the gateway
// sweep has its model publish it again.
import { lookup } from 'node:dns/promises';
import type { ModelRef } from '../../src/core/api.js';
import type { ExistingRoute, RouteSpec } from '../../src/core/route-rules.js';
import type { TrafficSample } from '../../src/core/rollout.js';
import { CaddyDriver, type CaddyOptions } from './caddy-driver.js';
import { GatewayUnavailable, type GatewayDriver } from './driver.js';

/** Every address a host name resolves to. */
export type Resolve = (host: string) => Promise<string[]>;

const resolveAll: Resolve = async (host) => (await lookup(host, { all: true })).map((a) => a.address);

/** How long a resolution of the replicas is used before asking DNS again. */
const resolutionSeconds = 5;

/** The URL with its host replaced by one address. */
function atAddress(url: URL, address: string): string {
  const u = new URL(url);
  u.hostname = address.includes(':') ? `[${address}]` : address;
  return u.origin;
}

export class CaddyFleet implements GatewayDriver {
  readonly kind = 'caddy';
  private readonly urls: URL[];
  /** One driver per replica address, kept while the address resolves: its admin lock is per replica. */
  private readonly drivers = new Map<string, CaddyDriver>();
  /** Loads in flight, by replica. */
  private readonly seeding = new Map<CaddyDriver, Promise<void>>();
  private resolved: { at: number; addresses: string[] } | undefined;

  constructor(
    private readonly opts: CaddyOptions,
    private readonly serviceIP?: (namespace: string, name: string) => Promise<string | undefined>,
    private readonly resolve: Resolve = resolveAll,
  ) {
    this.urls = opts.adminURL.split(',').map((u) => new URL(u.trim()));
  }

  private async addresses(): Promise<string[]> {
    if (this.resolved && Date.now() - this.resolved.at < resolutionSeconds * 1000) return this.resolved.addresses;
    const found = await Promise.all(
      this.urls.map(async (url) => {
        const host = url.hostname.replace(/^\[|\]$/g, '');
        try {
          return (await this.resolve(host)).map((a) => atAddress(url, a));
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code ?? String(err);
          throw new GatewayUnavailable(`Caddy admin API ${url.origin} does not resolve: ${code}`);
        }
      }),
    );
    const addresses = [...new Set(found.flat())].sort();
    if (addresses.length === 0) throw new GatewayUnavailable(`no Caddy replica at ${this.opts.adminURL}`);
    this.resolved = { at: Date.now(), addresses };
    for (const gone of [...this.drivers.keys()].filter((a) => !addresses.includes(a))) this.drivers.delete(gone);
    return addresses;
  }

  /**
   * Every replica's driver. With several, each is checked first (one small read): a replica without
   * the models' server gets the apps of one that has it, in one load. Caddy applies a load whole, so
   * a new replica opens its listener, and turns Ready, with every route at once. With no replica to
   * copy from (a new install, or all lost their state) the routes are published one by one, as on one.
   */
  private async replicas(): Promise<CaddyDriver[]> {
    const addresses = await this.addresses();
    const drivers = addresses.map((a) => {
      if (!this.drivers.has(a)) this.drivers.set(a, new CaddyDriver({ ...this.opts, adminURL: a }, this.serviceIP));
      return this.drivers.get(a)!;
    });
    if (drivers.length < 2) return drivers;
    const serving = await Promise.all(drivers.map((d) => d.hasServer()));
    const source = drivers.find((_, i) => serving[i]);
    if (source) await Promise.all(drivers.filter((_, i) => !serving[i]).map((d) => this.seed(d, source)));
    return drivers;
  }

  /** One load at a time per replica in this process, however many activities find it empty at once. */
  private seed(replica: CaddyDriver, source: CaddyDriver): Promise<void> {
    let loading = this.seeding.get(replica);
    if (!loading) {
      loading = (async () => {
        if (!(await replica.hasServer())) await replica.loadApps(await source.apps());
      })().finally(() => this.seeding.delete(replica));
      this.seeding.set(replica, loading);
    }
    return loading;
  }

  /** Every replica's routes; one that some replica lacks is incomplete. */
  async list(): Promise<ExistingRoute[]> {
    const replicas = await this.replicas();
    const lists = await Promise.all(replicas.map((r) => r.list()));
    const byId = new Map<string, { route: ExistingRoute; on: number }>();
    for (const routes of lists) {
      for (const route of routes) {
        const seen = byId.get(route.id);
        if (seen) seen.on++;
        else byId.set(route.id, { route, on: 1 });
      }
    }
    return [...byId.values()].map(({ route, on }) => (on < replicas.length ? { ...route, incomplete: true } : route));
  }

  async put(route: RouteSpec): Promise<boolean> {
    const changed = await Promise.all((await this.replicas()).map((r) => r.put(route)));
    return changed.some(Boolean);
  }

  async remove(id: string, owner: ModelRef): Promise<boolean> {
    const removed = await Promise.all((await this.replicas()).map((r) => r.remove(id, owner)));
    return removed.some(Boolean);
  }

  /** The canary's requests on every replica, each counted apart: each replica counts its own share. */
  async traffic(routeId: string): Promise<TrafficSample> {
    const replicas = await this.replicas();
    const samples = await Promise.all(replicas.map(async (r) => [r.adminURL, await r.traffic(routeId)] as const));
    return {
      requests: samples.reduce((n, [, s]) => n + s.requests, 0),
      errors: samples.reduce((n, [, s]) => n + s.errors, 0),
      replicas: Object.fromEntries(samples),
    };
  }

  publicURL(route: RouteSpec): string {
    return `${this.opts.publicURL.replace(/\/+$/, '')}${route.pathPrefix}`;
  }
}
