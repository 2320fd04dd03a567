// Which shards a replica takes, keeps and lets go, decided from what it last read of the Leases: a
// pure function, so that a property test can play every interleaving of replicas (test/unit/
// shard-assignment.test.ts). The I/O (reading and writing Leases) is src/sharding/shard-leases.ts.
//
// Safety, as client-go's leader election: a replica counts a Lease as expired only when it has seen
// no change to it for `durationMs` on its own monotonic clock (no clock is compared with another's),
// and a holder stops working on a shard once `renewDeadlineMs` (shorter) has passed since it last
// asked to renew. So one shard is not worked on by two replicas at once, provided its work stops
// within durationMs - renewDeadlineMs of the deadline and the clocks run at about the same rate.

export interface AssignmentTiming {
  /** Unchanged this long (as seen by the reader), a Lease is free to take. */
  durationMs: number;
  /** A holder that has not renewed for this long stops working on the shard. Less than durationMs. */
  renewDeadlineMs: number;
  /** A held shard's Lease is renewed once this much time has passed since the last renewal. */
  renewEveryMs: number;
}

/**
 * A shard's workers stop within 6 s of its renew deadline (src/worker/workers.ts, the shard workers'
 * shutdownForceTime), so by 8 + 6 = 14 s; another replica may take it at 15 s.
 */
export const defaultAssignmentTiming: AssignmentTiming = {
  durationMs: 15_000,
  renewDeadlineMs: 8_000,
  renewEveryMs: 3_000,
};

/** A Lease as last read: who holds it, and when (on the reader's clock) it last saw it change. */
export interface ObservedLease {
  holder: string | undefined;
  observedAt: number;
}

export interface AssignmentInput {
  me: string;
  now: number;
  count: number;
  /** Shard k's Lease; absent when it does not exist yet (then it is free). */
  shards: ReadonlyMap<number, ObservedLease>;
  /** The replicas alive as their membership Leases say (this one included or not: it is added). */
  members: readonly string[];
  /** The shards this replica holds, with when it last asked to take or renew each. */
  held: ReadonlyMap<number, number>;
  /** How far this replica takes part, from whether it reaches Temporal (participationOf). */
  participation: Participation;
  timing: AssignmentTiming;
}

export interface AssignmentDecision {
  /** Held shards that must stop at once: past the renew deadline, or the Lease names another holder. */
  lost: number[];
  /** Held shards beyond this replica's share: stop working on them, then free their Leases. */
  release: number[];
  renew: number[];
  acquire: number[];
}

/**
 * - serving: a member, taking its share;
 * - keeping: working on what it holds, taking nothing (Temporal did not answer a moment ago, or
 *   answers again after it left and has not for long yet);
 * - leaving: out of the membership, giving its shards to any member (Temporal has not answered for long).
 */
export type Participation = 'serving' | 'keeping' | 'leaving';

/** What this replica's probes of Temporal say: how long they have failed, or succeeded, in a row. */
export interface TemporalContact {
  downForMs: number;
  upForMs: number;
}

/** Out after two probes missed (every 5 s); back in the membership only after 30 s of answers. */
export const contactTiming = { leaveAfterMs: 10_000, rejoinAfterMs: 30_000 };

/**
 * The participation, from the contact and whether the replica had left the membership. Keeping
 * through a short outage and until the answers are steady moves shards once per outage, not at each
 * flap; a replica that just found Temporal again does not take shards from one that never lost it.
 */
export function participationOf(
  left: boolean,
  contact: TemporalContact,
  timing = contactTiming,
): { participation: Participation; left: boolean } {
  if (contact.downForMs >= timing.leaveAfterMs) return { participation: 'leaving', left: true };
  if (contact.downForMs > 0) return { participation: 'keeping', left };
  if (left && contact.upForMs < timing.rejoinAfterMs) return { participation: 'keeping', left };
  return { participation: 'serving', left: false };
}

export function isExpired(lease: ObservedLease | undefined, now: number, timing: AssignmentTiming): boolean {
  return !lease?.holder || now - lease.observedAt > timing.durationMs;
}

/** Whether a holder may still work on a shard it last asked to take or renew at `askedAt`. */
export function isStillHeld(askedAt: number, now: number, timing: AssignmentTiming): boolean {
  return now - askedAt <= timing.renewDeadlineMs;
}

/**
 * How many shards a member should hold: `count` split as evenly as possible, the larger shares to
 * the first members in name order, so that every replica computes the same split from the same view.
 */
export function shareOf(me: string, members: readonly string[], count: number): number {
  const sorted = [...new Set([...members, me])].sort();
  const index = sorted.indexOf(me);
  return Math.floor(count / sorted.length) + (index < count % sorted.length ? 1 : 0);
}

/**
 * Each replica prefers shards in its own pseudo-random order (rendezvous hashing), so that replicas
 * taking free shards at the same moment mostly reach for different ones.
 */
export function preference(me: string, k: number): number {
  let h = 0x811c9dc5;
  for (const ch of `${me}#${k}`) {
    h ^= ch.charCodeAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

function byPreference(me: string): (a: number, b: number) => number {
  return (a, b) => preference(me, b) - preference(me, a) || a - b;
}

export function decideAssignment(input: AssignmentInput): AssignmentDecision {
  const { me, now, count, shards, held, timing } = input;
  const lost: number[] = [];
  const kept: number[] = [];
  for (const [k, askedAt] of held) {
    const holder = shards.get(k)?.holder;
    if (!isStillHeld(askedAt, now, timing) || (holder !== undefined && holder !== me)) lost.push(k);
    else kept.push(k);
  }
  const others = input.members.filter((m) => m !== me);
  // Keeping: all it holds, nothing more. Leaving: nothing, unless no member can do better.
  const share =
    input.participation === 'keeping'
      ? kept.length
      : input.participation === 'leaving' && others.length > 0
        ? 0
        : shareOf(me, others, count);
  const acquiring = input.participation !== 'keeping';
  const order = byPreference(me);
  kept.sort(order);
  const release = kept.splice(share).sort((a, b) => a - b);
  const renew = kept.filter((k) => now - held.get(k)! >= timing.renewEveryMs).sort((a, b) => a - b);
  const free: number[] = [];
  for (let k = 0; k < count; k++) {
    // A Lease still naming this replica (it lost it to the deadline, or restarted) is retaken by the
    // same compare-and-swap as any other: it succeeds only if nobody else wrote the Lease since.
    const lease = shards.get(k);
    if (!held.has(k) && (isExpired(lease, now, timing) || lease?.holder === me)) free.push(k);
  }
  const acquire = free
    .sort(order)
    .slice(0, acquiring ? Math.max(0, share - kept.length) : 0)
    .sort((a, b) => a - b);
  return { lost: lost.sort((a, b) => a - b), release, renew, acquire };
}
