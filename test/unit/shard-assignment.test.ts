// Replicas taking shards through Leases, played as interleavings: each replica reads the Leases, decides
// (src/core/shard-assignment.ts), and writes with compare-and-swap some steps later, while others read,
// write, stall, crash, join and the clock moves. Invariant: no shard is worked on by two replicas at
// once. Liveness: once the faults stop, every shard has one worker and the split is even. Every
// counterexample found is kept as a named case at the end.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  contactTiming,
  decideAssignment,
  isStillHeld,
  participationOf,
  defaultAssignmentTiming as timing,
  shareOf,
  type AssignmentDecision,
  type ObservedLease,
} from '../../src/core/shard-assignment.js';

const count = 8;

interface Stored {
  holder: string | undefined;
  version: number;
}

interface Replica {
  id: string;
  alive: boolean;
  /** Lease name → the version last seen and when (this replica's clock) it was first seen. */
  seen: Map<string, { version: number; at: number }>;
  /** Shards it works on, with when it last asked to take or renew each. */
  held: Map<number, number>;
  /** Reaches Temporal, since when (the world's clock), and whether it left the membership. */
  reachable: boolean;
  reachableSince: number;
  left: boolean;
  /** A decision read but not yet written: its writes compare against the versions read then. */
  pending?: { at: number; read: Map<string, number>; decision: AssignmentDecision };
}

class World {
  now = 0;
  readonly leases = new Map<string, Stored>();
  readonly replicas: Replica[] = [];
  private nextId = 0;

  join(): void {
    this.replicas.push({
      id: `r${this.nextId++}`,
      alive: true,
      seen: new Map(),
      held: new Map(),
      reachable: true,
      reachableSince: this.now,
      left: false,
    });
  }

  /** Temporal out of reach of the replica, or back. */
  reach(r: Replica, reachable: boolean): void {
    if (r.reachable === reachable) return;
    r.reachable = reachable;
    r.reachableSince = this.now;
  }

  private observe(r: Replica, name: string): ObservedLease | undefined {
    const stored = this.leases.get(name);
    if (!stored) return undefined;
    const last = r.seen.get(name);
    if (!last || last.version !== stored.version) r.seen.set(name, { version: stored.version, at: this.now });
    return { holder: stored.holder, observedAt: r.seen.get(name)!.at };
  }

  /** Reads every Lease and decides; stops at once what is lost or released (before any write). */
  read(r: Replica): void {
    const shards = new Map<number, ObservedLease>();
    const read = new Map<string, number>();
    for (let k = 0; k < count; k++) {
      const lease = this.observe(r, `shard-${k}`);
      if (lease) shards.set(k, lease);
      read.set(`shard-${k}`, this.leases.get(`shard-${k}`)?.version ?? 0);
    }
    const members: string[] = [];
    for (const other of this.replicas) {
      const member = this.observe(r, `member-${other.id}`);
      if (member?.holder && this.now - member.observedAt <= timing.durationMs) members.push(member.holder);
    }
    const lasted = this.now - r.reachableSince;
    const contact = r.reachable ? { downForMs: 0, upForMs: lasted } : { downForMs: lasted, upForMs: 0 };
    const { participation, left } = participationOf(r.left, contact);
    r.left = left;
    const decision = decideAssignment({
      me: r.id,
      now: this.now,
      count,
      shards,
      members,
      held: r.held,
      participation,
      timing,
    });
    for (const k of [...decision.lost, ...decision.release]) r.held.delete(k);
    r.pending = { at: this.now, read, decision };
  }

  private cas(name: string, expected: number, holder: string | undefined): boolean {
    const stored = this.leases.get(name);
    if ((stored?.version ?? 0) !== expected) return false;
    this.leases.set(name, { holder, version: expected + 1 });
    return true;
  }

  /** Writes what it decided; a write whose Lease changed since the read fails and takes nothing. */
  write(r: Replica): void {
    const pending = r.pending;
    if (!pending) return;
    r.pending = undefined;
    const member = `member-${r.id}`;
    // Renewed while a member; else left (as ShardLeases deletes its Lease).
    this.cas(member, this.leases.get(member)?.version ?? 0, r.left ? undefined : r.id);
    const { decision, read, at } = pending;
    for (const k of decision.release) this.cas(`shard-${k}`, read.get(`shard-${k}`)!, undefined);
    for (const k of [...decision.renew, ...decision.acquire]) {
      if (this.cas(`shard-${k}`, read.get(`shard-${k}`)!, r.id)) r.held.set(k, at);
      else r.held.delete(k);
    }
  }

  /** What each live replica works on now: held, and not past its renew deadline (its timer stops the rest). */
  working(r: Replica): number[] {
    if (!r.alive) return [];
    return [...r.held].filter(([, at]) => isStillHeld(at, this.now, timing)).map(([k]) => k);
  }

  checkOneWorkerPerShard(): void {
    const workers = new Map<number, string[]>();
    for (const r of this.replicas) for (const k of this.working(r)) workers.set(k, [...(workers.get(k) ?? []), r.id]);
    for (const [k, ids] of workers) expect(ids, `shard ${k} at t=${this.now}`).toHaveLength(1);
  }

  /** Every live replica ticks in turn, read then write, for a while. */
  settle(ms: number): void {
    for (const end = this.now + ms; this.now < end; this.now += 1_000) {
      for (const r of this.replicas.filter((x) => x.alive)) {
        this.read(r);
        this.write(r);
      }
      this.checkOneWorkerPerShard();
    }
  }
}

type Step =
  | { kind: 'read' | 'write'; who: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'crash'; who: number }
  | { kind: 'cut' | 'heal'; who: number }
  | { kind: 'join' };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant<'read'>('read'), who: fc.nat(4) }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant<'write'>('write'), who: fc.nat(4) }) },
  {
    weight: 6,
    // Mostly less than a renewal's period, sometimes past the renew deadline or a Lease's duration.
    arbitrary: fc.constantFrom(300, 1_000, 2_000, 4_000, 9_000, 13_000).map((ms): Step => ({ kind: 'advance', ms })),
  },
  { weight: 1, arbitrary: fc.nat(4).map((who): Step => ({ kind: 'crash', who })) },
  // Temporal out of reach of one replica, and back.
  { weight: 1, arbitrary: fc.nat(4).map((who): Step => ({ kind: 'cut', who })) },
  { weight: 1, arbitrary: fc.nat(4).map((who): Step => ({ kind: 'heal', who })) },
  { weight: 1, arbitrary: fc.constant<Step>({ kind: 'join' }) },
);

/** 1 to 3 replicas to begin with, and up to `maxLength` steps (fast-check's default size makes about 4). */
const interleavings = (maxLength: number) =>
  [fc.integer({ min: 1, max: 3 }), fc.array(stepArb, { maxLength, size: 'max' })] as const;

function play(replicas: number, steps: Step[]): World {
  const world = new World();
  for (let i = 0; i < replicas; i++) world.join();
  for (const step of steps) {
    const alive = world.replicas.filter((r) => r.alive);
    if (step.kind === 'advance') world.now += step.ms;
    else if (step.kind === 'join') world.join();
    else if (alive.length > 0) {
      const r = alive[step.who % alive.length]!;
      if (step.kind === 'read') world.read(r);
      else if (step.kind === 'write') world.write(r);
      else if (step.kind === 'cut' || step.kind === 'heal') world.reach(r, step.kind === 'heal');
      else if (alive.length > 1) r.alive = false;
    }
    world.checkOneWorkerPerShard();
  }
  return world;
}

function expectSettled(world: World): void {
  for (const r of world.replicas) world.reach(r, true);
  world.settle(contactTiming.rejoinAfterMs + 3 * timing.durationMs);
  const alive = world.replicas.filter((r) => r.alive);
  const owners = alive.flatMap((r) => world.working(r));
  expect(owners.sort((a, b) => a - b)).toEqual([...Array(count).keys()]);
  const ids = alive.map((r) => r.id);
  for (const r of alive) expect(world.working(r)).toHaveLength(shareOf(r.id, ids, count));
}

describe('shards taken through Leases', () => {
  it('splits the shards evenly, the larger shares first in name order', () => {
    expect([0, 1, 2].map((i) => shareOf(`r${i}`, ['r0', 'r1', 'r2'], 8))).toEqual([3, 3, 2]);
    expect(shareOf('solo', [], 8)).toBe(8);
  });

  it('never lets two replicas work on one shard, whatever the interleaving of reads, writes, stalls, crashes and joins', () => {
    fc.assert(
      fc.property(...interleavings(150), (replicas, steps) => {
        play(replicas, steps);
      }),
      { numRuns: 400 },
    );
  });

  it('once the faults stop, gives every shard one worker and every live replica its share', () => {
    fc.assert(
      fc.property(...interleavings(100), (replicas, steps) => {
        expectSettled(play(replicas, steps));
      }),
      { numRuns: 200 },
    );
  });

  it("hands a dead replica's shards over within 20 s (its Leases expire after 15 s unseen to change)", () => {
    const world = play(2, []);
    world.settle(30_000);
    const [a, b] = world.replicas as [Replica, Replica];
    expect(world.working(a)).toHaveLength(4);
    a.alive = false;
    const diedAt = world.now;
    while (world.working(b).length < count) world.settle(1_000);
    expect(world.now - diedAt).toBeLessThanOrEqual(20_000);
  });

  it('a replica stalled past its renew deadline stops working before another takes its shard', () => {
    const world = play(1, []);
    world.settle(10_000);
    const [a] = world.replicas as [Replica];
    world.join();
    const b = world.replicas[1]!;
    // a stalls: b sees a's Leases unchanged for 15 s and takes them; a's deadline (8 s) came first.
    for (let t = 0; t < 20; t++) {
      world.now += 1_000;
      world.read(b);
      world.write(b);
      world.checkOneWorkerPerShard();
    }
    expect(world.working(a)).toEqual([]);
    world.read(a);
    world.write(a);
    world.settle(3 * timing.durationMs);
    expect(world.working(a)).toHaveLength(4);
    expect(world.working(b)).toHaveLength(4);
  });

  it('a replica that cannot reach Temporal for 10 s hands its shards to one that can, without waiting for them to expire', () => {
    const world = play(2, []);
    world.settle(30_000);
    const [a, b] = world.replicas as [Replica, Replica];
    world.reach(a, false);
    const cutAt = world.now;
    while (world.working(b).length < count) world.settle(1_000);
    expect(world.working(a)).toEqual([]);
    // Left after 10 s, then released and taken in the next ticks, not after a Lease's 15 s.
    expect(world.now - cutAt).toBeLessThanOrEqual(contactTiming.leaveAfterMs + 3_000);
    world.reach(a, true);
    // Back only after 30 s of answers: a flap does not move shards.
    world.settle(contactTiming.rejoinAfterMs - 2_000);
    expect(world.working(a)).toEqual([]);
    world.settle(3 * timing.durationMs);
    expect(world.working(a)).toHaveLength(4);
  });

  it('moves no shard for an outage shorter than 10 s, of one replica or of all', () => {
    const world = play(2, []);
    world.settle(30_000);
    const before = world.replicas.map((r) => world.working(r).join());
    for (const r of world.replicas) world.reach(r, false);
    world.settle(contactTiming.leaveAfterMs - 2_000);
    for (const r of world.replicas) world.reach(r, true);
    world.settle(3 * timing.durationMs);
    expect(world.replicas.map((r) => world.working(r).join())).toEqual(before);
  });

  it('keeps its shards while no member can do better: alone, or every replica cut off from Temporal', () => {
    const world = play(2, []);
    world.settle(30_000);
    for (const r of world.replicas) world.reach(r, false);
    world.settle(3 * timing.durationMs);
    // The first to leave may give its shards to the other before that one leaves too.
    const worked = world.replicas.flatMap((r) => world.working(r)).sort((x, y) => x - y);
    expect(worked).toEqual([...Array(count).keys()]);
    const [a] = world.replicas as [Replica];
    world.replicas[1]!.alive = false;
    world.settle(3 * timing.durationMs);
    expect(world.working(a)).toHaveLength(count);
  });
});
