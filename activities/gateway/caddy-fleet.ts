// Caddy on several replicas: each holds its routes in its own memory, so the operator publishes every
// change to every replica it finds. The admin URL names them all: a name that resolves to each
// replica's address (a headless Service) or a comma-separated list.
//
// A replica that starts with nothing (a new Pod) is given a running replica's whole config in one
// load before anything else. A replica that does not answer is left out for a while, so one lost
// node does not hold every model's publication; when it answers again it is given a running
// replica's whole config, since it missed the writes in between. A route that one replica lacks, or
// holds in another form, is listed as incomplete, and the gateway sweep has its model publish it again.
import { lookup } from 'node:dns/promises';
import { CancelledFailure } from '@temporalio/common';
import type { ModelRef } from '../../src/core/api.js';
import type { ExistingRoute, RouteSpec } from '../../src/core/route-rules.js';
import type { TrafficSample } from '../../src/core/rollout.js';
import { activityCancellation } from '../cancellation.js';
import { CaddyDriver, shownURL, type CaddyOptions } from './caddy-driver.js';
import { GatewayUnavailable, type GatewayDriver } from './driver.js';

/** Every address a host name resolves to. */
export type Resolve = (host: string) => Promise<{ address: string; family: number }[]>;

const resolveAll: Resolve = (host) => lookup(host, { all: true });

/** How long a resolution of the replicas is used before asking DNS again. */
const resolutionSeconds = 5;

/**
 * One address per replica: a dual-stack name gives each Pod an IPv4 and an IPv6 address, and
 * `localhost` both loopbacks; IPv4 is taken where there is any.
 */
function onePerReplica(found: { address: string; family: number }[]): string[] {
  const v4 = found.filter((a) => a.family === 4);
  return (v4.length > 0 ? v4 : found).map((a) => a.address);
}

/** The URL with its host replaced by one address (path and credentials kept). */
function atAddress(url: URL, address: string): string {
  const u = new URL(url);
  u.hostname = address.includes(':') ? `[${address}]` : address;
  return u.href.replace(/\/+$/, '');
}

/** `work`, or the signal's reason if it aborts first; its listener goes either way. */
async function unlessAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

export class CaddyFleet implements GatewayDriver {
  readonly kind = 'caddy';
  private readonly urls: URL[];
  /** One driver per replica address, kept while the address resolves: its admin lock is per replica. */
  private readonly drivers = new Map<string, CaddyDriver>();
  /** Replicas that did not answer: left out until then, and given a whole config when they answer again. */
  private readonly leftOut = new Map<string, number>();
  /** Loads in flight, by replica. */
  private readonly seeding = new Map<CaddyDriver, Promise<void>>();
  private resolved: { at: number; addresses: string[] } | undefined;

  constructor(
    private readonly opts: CaddyOptions,
    private readonly serviceIP?: (namespace: string, name: string) => Promise<string | undefined>,
    private readonly resolve: Resolve = resolveAll,
    /** How long a replica that did not answer is left out before it is tried again. */
    private readonly leftOutSeconds = 30,
  ) {
    this.urls = opts.adminURL.split(',').map((u) => new URL(u.trim()));
  }

  private async addresses(): Promise<string[]> {
    if (this.resolved && Date.now() - this.resolved.at < resolutionSeconds * 1000) return this.resolved.addresses;
    const found = await Promise.all(
      this.urls.map(async (url) => {
        const host = url.hostname.replace(/^\[|\]$/g, '');
        let addresses: string[];
        try {
          addresses = onePerReplica(await this.resolve(host));
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code ?? String(err);
          throw new GatewayUnavailable(`Caddy admin API ${url.origin} does not resolve: ${code}`);
        }
        // One replica: the URL as written (its host name for TLS and the Host header).
        return addresses.length === 1 ? [url.href.replace(/\/+$/, '')] : addresses.map((a) => atAddress(url, a));
      }),
    );
    const addresses = [...new Set(found.flat())].sort();
    if (addresses.length === 0) throw new GatewayUnavailable(`no Caddy replica at ${shownURL(this.opts.adminURL)}`);
    this.resolved = { at: Date.now(), addresses };
    for (const gone of [...this.drivers.keys()].filter((a) => !addresses.includes(a))) {
      this.drivers.delete(gone);
      this.leftOut.delete(gone);
    }
    return addresses;
  }

  private driver(address: string): CaddyDriver {
    let d = this.drivers.get(address);
    if (!d) {
      d = new CaddyDriver({ ...this.opts, adminURL: address }, this.serviceIP);
      this.drivers.set(address, d);
    }
    return d;
  }

  /**
   * The replicas to write to. With one, it. With several, each is checked first (one small read): one
   * that does not answer is left out; one without the models' server, or back from being left out,
   * gets the apps of one that answered with them, in one load. Caddy applies a load whole, so a new
   * replica opens its listener, and turns Ready, with every route at once. With no replica to copy
   * from (a new install, or all lost their state), the routes are published one by one, as on one.
   */
  private async replicas(): Promise<CaddyDriver[]> {
    const addresses = await this.addresses();
    if (addresses.length === 1) return [this.driver(addresses[0]!)];
    const now = Date.now();
    const tried = addresses.filter((a) => (this.leftOut.get(a) ?? 0) <= now);
    const serving = await Promise.all(
      tried.map((a) =>
        this.driver(a)
          .hasServer()
          .catch((err: unknown) => {
            // This activity was cancelled, not the replica gone: nothing to leave out.
            if (err instanceof CancelledFailure) throw err;
            return undefined;
          }),
      ),
    );
    const answered = tried.filter((_, i) => serving[i] !== undefined);
    for (const a of tried.filter((_, i) => serving[i] === undefined)) this.leaveOut(a);
    if (answered.length === 0) {
      throw new GatewayUnavailable(
        `no Caddy replica at ${shownURL(this.opts.adminURL)} answers (${addresses.length} found)`,
      );
    }
    const back = (a: string) => this.leftOut.has(a);
    const source = answered.find((a) => serving[tried.indexOf(a)] && !back(a));
    const stale = answered.filter((a) => !serving[tried.indexOf(a)] || back(a));
    if (source) {
      await Promise.all(stale.filter((a) => a !== source).map((a) => this.seed(this.driver(a), this.driver(source))));
    }
    for (const a of answered) this.leftOut.delete(a);
    return answered.map((a) => this.driver(a));
  }

  private leaveOut(address: string) {
    this.leftOut.set(address, Date.now() + this.leftOutSeconds * 1000);
  }

  /**
   * One load at a time per replica in this process, however many activities find it stale at once. A
   * load ended by the cancellation of the activity that started it is started again by a waiter whose
   * own activity goes on (one shard's stop must not fail other shards' gateway steps).
   */
  private async seed(replica: CaddyDriver, source: CaddyDriver): Promise<void> {
    for (;;) {
      let loading = this.seeding.get(replica);
      if (!loading) {
        loading = (async () => replica.loadApps(await source.apps()))().finally(() => this.seeding.delete(replica));
        this.seeding.set(replica, loading);
      }
      const own = activityCancellation();
      try {
        // A waiter whose own activity is cancelled stops waiting (its worker is stopping).
        return await unlessAborted(loading, own);
      } catch (err) {
        if (err instanceof CancelledFailure && !own?.aborted) continue;
        throw err;
      }
    }
  }

  /**
   * Runs `op` on every replica. A replica that fails is left out (and given a whole config when it
   * answers again); the failure is still thrown, so the activity's retry goes on with the others.
   */
  private async onEach<T>(op: (d: CaddyDriver) => Promise<T>): Promise<T[]> {
    const replicas = await this.replicas();
    const results = await Promise.allSettled(replicas.map(op));
    const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [{ err: r.reason as unknown, i }] : []));
    if (failed.length === 0) return results.map((r) => (r as PromiseFulfilledResult<T>).value);
    if (replicas.length > 1) {
      for (const { err, i } of failed) if (err instanceof GatewayUnavailable) this.leaveOut(replicas[i]!.adminURL);
    }
    throw failed[0]!.err;
  }

  /** Every replica's routes; one that some replica lacks, or holds otherwise, is incomplete. */
  async list(): Promise<ExistingRoute[]> {
    const lists = await this.onEach((r) => r.list());
    const byId = new Map<string, { route: ExistingRoute; on: number; same: boolean }>();
    for (const routes of lists) {
      for (const route of routes) {
        const seen = byId.get(route.id);
        if (!seen) byId.set(route.id, { route, on: 1, same: true });
        else {
          seen.on++;
          seen.same &&= seen.route.fingerprint === route.fingerprint;
        }
      }
    }
    return [...byId.values()].map(({ route, on, same }) =>
      on < lists.length || !same ? { ...route, incomplete: true } : route,
    );
  }

  async put(route: RouteSpec): Promise<boolean> {
    return (await this.onEach((r) => r.put(route))).some(Boolean);
  }

  async remove(id: string, owner: ModelRef): Promise<boolean> {
    return (await this.onEach((r) => r.remove(id, owner))).some(Boolean);
  }

  /** The canary's requests on every replica, each counted apart: each replica counts its own share. */
  async traffic(routeId: string): Promise<TrafficSample> {
    const samples = await this.onEach(async (r) => [r.shownURL, await r.traffic(routeId)] as const);
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
