// The shards this replica holds, through one Lease per shard and one membership Lease per replica in
// the operator's namespace. Each tick reads every Lease (one list), lets the pure decision
// (src/core/shard-assignment.ts) say what to take, keep and free, and writes with the resourceVersion
// it read, so that of two replicas reaching for one Lease only one succeeds. The shards held are
// handed to `place` (the workers and the informer); a shard is freed only after `place` has stopped
// working on it, and dropped at once when its renewal deadline passes, whatever the tick is doing.
import { CoordinationV1Api, KubeConfig, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  decideAssignment,
  defaultAssignmentTiming,
  isExpired,
  isStillHeld,
  participationOf,
  type AssignmentTiming,
  type TemporalContact,
  type ObservedLease,
} from '../core/shard-assignment.js';
import { apiClient } from '../process/kube-api.js';
import { apiMessage, apiStatus } from '../process/kube-errors.js';
import { layoutTag, namespaceHash, type ShardLayout } from '../core/shards.js';

export interface ShardLeaseOptions {
  /** The operator's namespace, where its Leases live. */
  namespace: string;
  /** This replica's name in the Leases: unique per process. */
  identity: string;
  layout: ShardLayout;
  /**
   * Lease names start with it (one install's Leases): `<prefix>-shard-<k>-of-<tag>`,
   * `<prefix>-member-of-<tag>-<identity>`, the tag being N, or N and `m` for the mixed hash.
   */
  prefix: string;
  timing?: AssignmentTiming;
  tickMs?: number;
  /** What this replica's probes of Temporal say; always answering, if not given. */
  contact?: () => TemporalContact;
}

const partOf = 'app.kubernetes.io/part-of';

/**
 * A Kubernetes name made of a task queue's name (which may hold any character), short enough for a
 * label value (63): a long or rewritten name ends with a hash of the queue's, so two queues never share Leases.
 */
export function leasePrefixFor(taskQueue: string): string {
  const name = taskQueue
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (name && name === taskQueue && name.length <= 40) return name;
  return `${name.slice(0, 23).replace(/-+$/, '') || 'mmo'}-${namespaceHash(taskQueue).toString(16).padStart(16, '0')}`;
}

/**
 * Shard k's Lease. The count and hash are in the name: replicas of another layout (a change rolling
 * out) never share one.
 */
export function shardLeaseName(prefix: string, k: number, layout: ShardLayout): string {
  return `${prefix}-shard-${k}-of-${layoutTag(layout)}`;
}

/** A monotonic clock: a Lease's age must not jump with the wall clock. */
const clock = () => performance.now();

/** A MicroTime as read back: the client hands it over as the server's string, not as a Date. */
function microTime(value: Date | string | undefined): V1MicroTime | undefined {
  if (value === undefined) return undefined;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(ms) ? undefined : new V1MicroTime(ms);
}

export class ShardLeases {
  private readonly api: CoordinationV1Api;
  private readonly timing: AssignmentTiming;
  private readonly tickMs: number;
  /** Held shards, with when this replica last asked to take or renew each (its own clock). */
  private readonly held = new Map<number, number>();
  /** Lease name → the resourceVersion last read and when it was first read so. */
  private readonly seen = new Map<string, { version: string; at: number }>();
  private stopped = false;
  private loop: Promise<void> | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private memberRenewedAt = -Infinity;
  /** Whether it left the membership (Temporal did not answer for long) and has not rejoined. */
  private left = false;
  /** Shards taken since start, for the metrics. */
  taken = 0;

  constructor(
    kc: KubeConfig,
    private readonly opts: ShardLeaseOptions,
    private readonly place: (owned: number[]) => Promise<void>,
    private readonly log: Logger,
  ) {
    this.api = apiClient(kc, CoordinationV1Api, { timeoutMs: 5_000 });
    this.timing = opts.timing ?? defaultAssignmentTiming;
    this.tickMs = opts.tickMs ?? 1_000;
  }

  get owned(): number[] {
    return [...this.held.keys()].sort((a, b) => a - b);
  }

  private shardLease(k: number): string {
    return shardLeaseName(this.opts.prefix, k, this.opts.layout);
  }

  /** Members of another layout are not counted: they take other Leases. */
  private get memberPrefix(): string {
    return `${this.opts.prefix}-member-of-${layoutTag(this.opts.layout)}-`;
  }

  private get memberLease(): string {
    return `${this.memberPrefix}${this.opts.identity}`;
  }

  start(): void {
    this.deadlineTimer = setInterval(() => this.dropOverdue(), 250);
    this.loop = (async () => {
      while (!this.stopped) {
        await this.tick().catch((err: unknown) =>
          this.log.warn({ err: apiMessage(err) }, 'reading the shard Leases failed; trying again'),
        );
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.tickMs);
          this.wake = () => (clearTimeout(timer), resolve());
        });
      }
    })();
  }

  /** Past its renewal deadline a shard is dropped at once: another replica may take it soon after. */
  private dropOverdue(): void {
    const now = clock();
    const overdue = [...this.held].filter(([, at]) => !isStillHeld(at, now, this.timing)).map(([k]) => k);
    if (overdue.length === 0) return;
    for (const k of overdue) this.held.delete(k);
    this.log.warn({ shards: overdue }, 'shard Leases not renewed in time: stopped working on them');
    void this.place(this.owned);
  }

  private observe(lease: V1Lease, now: number): ObservedLease {
    const name = lease.metadata?.name ?? '';
    const version = lease.metadata?.resourceVersion ?? '';
    const last = this.seen.get(name);
    if (!last || last.version !== version) this.seen.set(name, { version, at: now });
    return { holder: lease.spec?.holderIdentity || undefined, observedAt: this.seen.get(name)!.at };
  }

  private async tick(): Promise<void> {
    const now = clock();
    const listed = await this.api.listNamespacedLease({
      namespace: this.opts.namespace,
      labelSelector: `${partOf}=${this.opts.prefix}`,
    });
    const byName = new Map(listed.items.map((l) => [l.metadata?.name ?? '', l]));
    const shards = new Map<number, ObservedLease>();
    for (let k = 0; k < this.opts.layout.count; k++) {
      const lease = byName.get(this.shardLease(k));
      if (lease) shards.set(k, this.observe(lease, now));
    }
    const members: string[] = [];
    for (const lease of listed.items) {
      if (!lease.metadata?.name?.startsWith(this.memberPrefix)) continue;
      const seen = this.observe(lease, now);
      if (seen.holder && !isExpired(seen, now, this.timing)) members.push(seen.holder);
      // A replica gone long ago (each process has its own identity): its Lease would stay forever.
      else if (now - seen.observedAt > 10 * this.timing.durationMs) void this.remove(lease);
    }
    const { participation, left } = participationOf(this.left, this.opts.contact?.() ?? { downForMs: 0, upForMs: 0 });
    if (left !== this.left) {
      this.left = left;
      if (left)
        this.log.warn('cannot work on shards (Temporal does not answer): left the membership for another replica');
      else this.log.info('Temporal answers steadily again: back in the shard membership');
    }
    const decision = decideAssignment({
      me: this.opts.identity,
      now,
      count: this.opts.layout.count,
      shards,
      members,
      held: this.held,
      participation,
      timing: this.timing,
    });
    if (this.stopped) return;
    const dropped = [...decision.lost, ...decision.release];
    for (const k of dropped) this.held.delete(k);
    if (decision.lost.length) this.log.warn({ shards: decision.lost }, 'shards taken by another replica');
    const placed = dropped.length ? this.place(this.owned) : Promise.resolve();
    // Freed only once nothing here works on them any more; the tick goes on meanwhile.
    for (const k of decision.release) void placed.then(() => this.free(k));
    const memberDue = !left && now - this.memberRenewedAt >= this.timing.renewEveryMs;
    const member = byName.get(this.memberLease);
    // Out of the membership at once, so the others count this replica's share as theirs.
    if (left && member?.spec?.holderIdentity) {
      this.memberRenewedAt = -Infinity;
      void this.remove(member);
    }
    const writes = [
      memberDue
        ? this.write(this.memberLease, member).then((ok) => {
            if (ok) this.memberRenewedAt = now;
          })
        : undefined,
      ...decision.renew.map(async (k) => {
        if (!(await this.write(this.shardLease(k), byName.get(this.shardLease(k))))) this.held.delete(k);
        else if (this.held.has(k)) this.held.set(k, now);
      }),
      ...decision.acquire.map(async (k) => {
        if (await this.write(this.shardLease(k), byName.get(this.shardLease(k)))) {
          this.held.set(k, now);
          this.taken++;
        }
      }),
    ];
    await Promise.all(writes);
    const changed = decision.acquire.some((k) => this.held.has(k)) || decision.renew.some((k) => !this.held.has(k));
    if (changed) this.log.info({ shards: this.owned }, 'holding shards');
    // Every tick, not awaited: renewing never waits for workers to start or stop, and a placement
    // that failed (a worker that could not start) is tried again.
    if (!this.stopped) void this.place(this.owned);
  }

  /** Takes or renews a Lease for this replica, against the version read; false when another wrote first. */
  private async write(name: string, read: V1Lease | undefined): Promise<boolean> {
    // A Lease's times are MicroTime: six digits of fraction, which a plain Date does not write. They
    // are for people reading the Lease; the decisions use this process's monotonic clock.
    const at = new V1MicroTime(Date.now());
    const acquired = microTime(read?.spec?.acquireTime) ?? at;
    const durationSeconds = Math.ceil(this.timing.durationMs / 1000);
    try {
      if (!read) {
        await this.api.createNamespacedLease({
          namespace: this.opts.namespace,
          body: {
            metadata: { name, namespace: this.opts.namespace, labels: { [partOf]: this.opts.prefix } },
            spec: {
              holderIdentity: this.opts.identity,
              leaseDurationSeconds: durationSeconds,
              acquireTime: at,
              renewTime: at,
            },
          },
        });
        return true;
      }
      const mine = read.spec?.holderIdentity === this.opts.identity;
      await this.api.replaceNamespacedLease({
        name,
        namespace: this.opts.namespace,
        body: {
          ...read,
          spec: {
            ...read.spec,
            holderIdentity: this.opts.identity,
            leaseDurationSeconds: durationSeconds,
            renewTime: at,
            acquireTime: mine ? acquired : at,
            ...(mine ? {} : { leaseTransitions: (read.spec?.leaseTransitions ?? 0) + 1 }),
          },
        },
      });
      return true;
    } catch (err) {
      if (apiStatus(err) !== 409) this.log.warn({ lease: name, err: apiMessage(err) }, 'writing a Lease failed');
      return false;
    }
  }

  private async remove(lease: V1Lease): Promise<void> {
    const { name = '', resourceVersion } = lease.metadata ?? {};
    await this.api
      .deleteNamespacedLease({ name, namespace: this.opts.namespace, body: { preconditions: { resourceVersion } } })
      .catch(() => undefined);
  }

  /** Frees a shard's Lease if it still names this replica, so that its next owner need not wait for it to expire. */
  private async free(k: number): Promise<void> {
    const name = this.shardLease(k);
    try {
      const lease = await this.api.readNamespacedLease({ name, namespace: this.opts.namespace });
      if (lease.spec?.holderIdentity !== this.opts.identity || this.held.has(k)) return;
      await this.api.replaceNamespacedLease({
        name,
        namespace: this.opts.namespace,
        body: {
          ...lease,
          spec: { ...lease.spec, holderIdentity: undefined, renewTime: undefined, acquireTime: undefined },
        },
      });
    } catch (err) {
      // It expires by itself.
      this.log.info({ lease: name, err: apiMessage(err) }, 'freeing a shard Lease failed; it will expire');
    }
  }

  /** Stops working on every shard, then frees their Leases and leaves the membership. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.deadlineTimer);
    this.wake?.();
    await this.loop;
    const held = this.owned;
    this.held.clear();
    await this.place([]);
    await Promise.all(held.map((k) => this.free(k)));
    await this.api
      .deleteNamespacedLease({ name: this.memberLease, namespace: this.opts.namespace })
      .catch(() => undefined);
  }
}
