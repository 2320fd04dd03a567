import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeletionLane } from '../../src/informer/deletion-lane.js';
import type { SignalRequest } from '../../src/informer/event-filter.js';

const deleted = (namespace: string, name: string, uid = `${name}-uid`): SignalRequest => ({
  namespace,
  name,
  signal: 'deleted',
  hint: { source: 'MachineModel', event: 'deleted' },
  uid,
});

const limit = 300_000;
const recheck = 10_000;

/** A lane, what it told, and whether a namespace deletion with models is under way (the test says). */
function lane() {
  const told: SignalRequest[] = [];
  const deleting = { now: true };
  const l = new DeletionLane(
    (r) => told.push(r),
    () => deleting.now,
    { holdLimitMs: limit, recheckMs: recheck },
  );
  return { l, told, deleting, names: () => told.map((r) => `${r.namespace}/${r.name}`) };
}

describe('the deletion lane: models deleted with their namespace', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('tells their workflows once no namespace is being deleted, each model once, with its last request', () => {
    const { l, told, deleting, names } = lane();
    l.hold(deleted('a', 'm1', 'old'));
    l.hold(deleted('a', 'm2'));
    l.hold(deleted('b', 'm3'));
    l.hold(deleted('a', 'm1', 'new'));
    expect(l.heldCount).toBe(3);
    l.look();
    expect(names()).toEqual([]);
    deleting.now = false;
    l.look();
    expect(names()).toEqual(['a/m1', 'a/m2', 'b/m3']);
    expect(told[0]!.uid).toBe('new');
    l.look();
    expect(names()).toEqual(['a/m1', 'a/m2', 'b/m3']);
    expect(l.heldCount).toBe(0);
    expect(l.released).toBe(3);
  });

  it('looks again every recheck while it holds anything, and keeps no timer once empty', () => {
    const { l, deleting, names } = lane();
    l.hold(deleted('a', 'm1'));
    vi.advanceTimersByTime(3 * recheck);
    expect(names()).toEqual([]);
    // A reshard or a relist: the deletion ended with no Namespace event.
    deleting.now = false;
    vi.advanceTimersByTime(recheck);
    expect(names()).toEqual(['a/m1']);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('tells them at the hold limit, counted from the namespace’s first held deletion, if the namespace stays', () => {
    const { l, names } = lane();
    l.hold(deleted('a', 'm1'));
    vi.advanceTimersByTime(limit - 1000);
    l.hold(deleted('a', 'm2'));
    vi.advanceTimersByTime(999);
    expect(names()).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(names()).toEqual(['a/m1', 'a/m2']);
    l.hold(deleted('a', 'm3'));
    vi.advanceTimersByTime(limit);
    expect(names()).toEqual(['a/m1', 'a/m2', 'a/m3']);
  });

  it('keeps a namespace held again after it was let go to its own limit (counterexample: a stale timer told it early)', () => {
    const { l, names } = lane();
    l.hold(deleted('a', 'm1'));
    l.forget((ns) => ns === 'a');
    vi.advanceTimersByTime(20_000);
    l.hold(deleted('a', 'm2'));
    vi.advanceTimersByTime(limit - 1);
    expect(names()).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(names()).toEqual(['a/m2']);
  });

  it('forgets what a lost shard held and, when it stops, everything (the next owner’s sweep tells them)', () => {
    const { l, names } = lane();
    l.hold(deleted('a', 'm1'));
    l.hold(deleted('b', 'm2'));
    l.forget((ns) => ns === 'a');
    expect(l.sinceLastHeld('a')).toBeUndefined();
    vi.advanceTimersByTime(limit);
    expect(names()).toEqual(['b/m2']);
    l.hold(deleted('c', 'm3'));
    l.stop();
    vi.advanceTimersByTime(limit);
    expect(names()).toEqual(['b/m2']);
    expect(l.heldCount).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('says how long ago it last held a namespace’s deletion (a namespace settles after its last model)', () => {
    const { l } = lane();
    expect(l.sinceLastHeld('a')).toBeUndefined();
    l.hold(deleted('a', 'm1'));
    vi.advanceTimersByTime(4_000);
    expect(l.sinceLastHeld('a')).toBe(4_000);
    l.hold(deleted('a', 'm2'));
    vi.advanceTimersByTime(1_000);
    expect(l.sinceLastHeld('a')).toBe(1_000);
    expect(l.sinceLastHeld('b')).toBeUndefined();
  });
});

type Op =
  | { op: 'hold'; ns: string; model: string }
  | { op: 'allGone' }
  | { op: 'wait'; ms: number }
  | { op: 'lost'; ns: string };

const namespaces = ['a', 'b'];
const ops = fc.array(
  fc.oneof(
    fc.record({
      op: fc.constant('hold' as const),
      ns: fc.constantFrom(...namespaces),
      model: fc.constantFrom('m1', 'm2', 'm3'),
    }),
    fc.record({ op: fc.constant('allGone' as const) }),
    fc.record({ op: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: limit }) }),
    fc.record({ op: fc.constant('lost' as const), ns: fc.constantFrom(...namespaces) }),
  ),
  { maxLength: 40 },
);

describe('the deletion lane under any interleaving (property)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('tells each held deletion once, when no namespace is being deleted or at the hold limit, unless its shard is lost', () => {
    fc.assert(
      fc.property(ops, (script: Op[]) => {
        vi.clearAllTimers();
        const { l, told, deleting } = lane();
        /** The model: deletions held per namespace, and when the namespace's hold began. */
        const pending = new Map<string, Set<string>>();
        const firstHeld = new Map<string, number>();
        let now = 0;
        /** What the lane told since last asked, which must be exactly what these namespaces held. */
        const expectTold = (...gone: string[]) => {
          const got = told.splice(0).map((r) => `${r.namespace}/${r.name}`);
          expect(got.sort()).toEqual(gone.flatMap((ns) => [...(pending.get(ns) ?? [])]).sort());
          for (const ns of gone) {
            pending.delete(ns);
            firstHeld.delete(ns);
          }
        };
        for (const step of script) {
          if (step.op === 'hold') {
            if (!firstHeld.has(step.ns)) firstHeld.set(step.ns, now);
            pending.set(step.ns, (pending.get(step.ns) ?? new Set()).add(`${step.ns}/${step.model}`));
            l.hold(deleted(step.ns, step.model));
          } else if (step.op === 'allGone') {
            // Only here is no deletion under way: the rechecks in between find one each time.
            deleting.now = false;
            l.look();
            deleting.now = true;
            expectTold(...pending.keys());
          } else if (step.op === 'lost') {
            // Forgotten, not told: the shard's next owner tells them.
            l.forget((ns) => ns === step.ns);
            pending.delete(step.ns);
            firstHeld.delete(step.ns);
          } else {
            // Time passes up to each hold limit in turn, so each telling is checked as it happens.
            const until = now + step.ms;
            const deadlines = [...new Set(firstHeld.values())].map((since) => since + limit).sort((x, y) => x - y);
            for (const deadline of deadlines.filter((d) => d <= until)) {
              vi.advanceTimersByTime(deadline - 1 - now);
              expect(told).toEqual([]);
              vi.advanceTimersByTime(1);
              now = deadline;
              expectTold(...[...firstHeld].filter(([, since]) => since + limit === deadline).map(([ns]) => ns));
            }
            vi.advanceTimersByTime(until - now);
            now = until;
          }
          // Never early, never twice: nothing is told but at a namespace's end or its hold limit.
          expect(told).toEqual([]);
          expect(l.heldCount).toBe([...pending.values()].reduce((n, held) => n + held.size, 0));
        }
        // Eventually: whatever is still held is told within the hold limit.
        vi.advanceTimersByTime(limit);
        const left = told.map((r) => `${r.namespace}/${r.name}`).sort();
        expect(left).toEqual([...pending.values()].flatMap((held) => [...held]).sort());
      }),
      { numRuns: 1000 },
    );
  });
});
