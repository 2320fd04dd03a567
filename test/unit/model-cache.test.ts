// The node cache's accounting (src/core/model-cache.ts): generated interleavings of fetches,
// completions, mounts and unmounts across namespaces, checked after every step.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  complete,
  emptyCache,
  mount,
  namespaceBytes,
  parseQuota,
  release,
  reserve,
  unmount,
  usedBytes,
  type CacheState,
} from '../../src/core/model-cache.js';

const namespaces = ['a', 'b', 'c'];
const quotas: Record<string, number | undefined> = { a: 300, b: undefined, c: 120 };

type Op =
  | { op: 'reserve'; fetch: number; ns: number; bytes: number }
  | { op: 'release'; fetch: number }
  | { op: 'complete'; fetch: number; key: number }
  | { op: 'mount'; key: number; volume: number; ns: number }
  | { op: 'unmount'; volume: number };

const ops = fc.array(
  fc.oneof(
    fc.record({
      op: fc.constant('reserve' as const),
      fetch: fc.nat(4),
      ns: fc.nat(2),
      bytes: fc.integer({ min: 0, max: 250 }),
    }),
    fc.record({ op: fc.constant('release' as const), fetch: fc.nat(4) }),
    fc.record({ op: fc.constant('complete' as const), fetch: fc.nat(4), key: fc.nat(5) }),
    fc.record({ op: fc.constant('mount' as const), key: fc.nat(5), volume: fc.nat(6), ns: fc.nat(2) }),
    fc.record({ op: fc.constant('unmount' as const), volume: fc.nat(6) }),
  ),
  { maxLength: 40 },
);

const mounted = (s: CacheState) =>
  new Set(
    Object.entries(s.entries)
      .filter(([, e]) => Object.keys(e.mounts).length > 0)
      .map(([k]) => k),
  );

/** One step, as the plugin takes it: refusals leave the state as it was. */
function step(s: CacheState, o: Op, now: number): { state: CacheState; evicted: string[] } {
  switch (o.op) {
    case 'reserve': {
      const ns = s.fetches[`f${o.fetch}`]?.namespace ?? namespaces[o.ns]!;
      const a = reserve(s, `f${o.fetch}`, ns, o.bytes, quotas[ns]);
      if (!a.ok) return { state: s, evicted: [] };
      // A quota is never passed by what it admits.
      const quota = quotas[ns];
      if (quota !== undefined && o.bytes > (s.fetches[`f${o.fetch}`]?.reserved ?? 0))
        expect(namespaceBytes(a.state, ns)).toBeLessThanOrEqual(quota);
      return { state: a.state, evicted: a.evicted };
    }
    case 'release':
      return { state: release(s, `f${o.fetch}`), evicted: [] };
    case 'complete': {
      const f = s.fetches[`f${o.fetch}`];
      if (!f) return { state: s, evicted: [] };
      return { state: complete(s, `f${o.fetch}`, `k${o.key}`, f.reserved, now), evicted: [] };
    }
    case 'mount': {
      if (!s.entries[`k${o.key}`]) return { state: s, evicted: [] };
      // A volume mounts one entry: the kubelet publishes a volume once.
      if (Object.values(s.entries).some((e) => `v${o.volume}` in e.mounts)) return { state: s, evicted: [] };
      const ns = namespaces[o.ns]!;
      const m = mount(s, `k${o.key}`, `v${o.volume}`, ns, quotas[ns], now);
      if (!m.ok) return { state: s, evicted: [] };
      const quota = quotas[ns];
      if (quota !== undefined && namespaceBytes(m.state, ns) > namespaceBytes(s, ns))
        expect(namespaceBytes(m.state, ns)).toBeLessThanOrEqual(quota);
      return { state: m.state, evicted: [] };
    }
    case 'unmount':
      return { state: unmount(s, `v${o.volume}`, now), evicted: [] };
  }
}

describe('the node cache accounting', () => {
  it('never passes its capacity, never evicts a mounted entry, evicts least recently used first (10,000 runs)', () => {
    fc.assert(
      fc.property(ops, fc.integer({ min: 100, max: 600 }), (sequence, capacity) => {
        let s = emptyCache(capacity);
        sequence.forEach((o, now) => {
          const before = s;
          const { state, evicted } = step(s, o, now);
          for (const key of evicted) {
            expect(mounted(before).has(key)).toBe(false);
            // Nothing idle and older stays while a younger one goes.
            const idleKept = Object.entries(state.entries).filter(([, e]) => Object.keys(e.mounts).length === 0);
            for (const [, kept] of idleKept)
              expect(kept.lastUsed).toBeGreaterThanOrEqual(before.entries[key]!.lastUsed);
          }
          for (const key of mounted(before)) expect(state.entries[key]).toBeDefined();
          expect(usedBytes(state)).toBeLessThanOrEqual(capacity);
          s = state;
        });
      }),
      { numRuns: 10_000 },
    );
  });

  // Counterexample found by the property: a fetch another namespace joins stays its starter's, so the
  // joiner's quota neither pays for it nor is passed by it.
  it('keeps a fetch charged to the namespace that started it', () => {
    let s = emptyCache(301);
    for (const [fetch, ns, bytes] of [
      ['f0', 'a', 105],
      ['f3', 'b', 1],
      ['f1', 'a', 90],
    ] as const) {
      const r = reserve(s, fetch, ns, bytes, quotas[ns]);
      if (!r.ok) throw new Error(r.message);
      s = r.state;
    }
    const joined = reserve(s, 'f3', 'a', 106, quotas.b);
    expect(joined.ok && joined.state.fetches.f3).toEqual({ namespace: 'b', reserved: 106 });
    expect(joined.ok && namespaceBytes(joined.state, 'a')).toBe(195);
  });

  it('refuses a fetch its namespace has no quota left for, in words a person reads', () => {
    let s = emptyCache(1000);
    const a = reserve(s, 'f1', 'c', 100, 120);
    expect(a.ok).toBe(true);
    s = a.ok ? a.state : s;
    const b = reserve(s, 'f2', 'c', 50, 120);
    expect(b).toMatchObject({ ok: false, reason: 'QuotaExceeded' });
    expect(!b.ok && b.message).toMatch(/namespace c may hold 0\.0 MiB .* it holds 0\.0 MiB/);
  });

  it('charges a shared entry to each namespace that mounts it, once', () => {
    const r = reserve(emptyCache(1000), 'f', 'a', 100, undefined);
    if (!r.ok) throw new Error(r.message);
    let s = complete(r.state, 'f', 'k', 100, 1);
    for (const [volume, ns] of [
      ['v1', 'a'],
      ['v2', 'a'],
      ['v3', 'b'],
    ] as const) {
      const m = mount(s, 'k', volume, ns, undefined, 2);
      expect(m.ok).toBe(true);
      if (m.ok) s = m.state;
    }
    expect(namespaceBytes(s, 'a')).toBe(100);
    expect(namespaceBytes(s, 'b')).toBe(100);
    expect(usedBytes(s)).toBe(100);
    expect(mount(s, 'k', 'v4', 'c', 50, 3)).toMatchObject({ ok: false, reason: 'QuotaExceeded' });
  });

  it('says CacheFull when only mounted entries and fetches hold the room', () => {
    let s = emptyCache(200);
    const r = reserve(s, 'f', 'a', 150, undefined);
    s = r.ok ? complete(r.state, 'f', 'k', 150, 1) : s;
    const m = mount(s, 'k', 'v', 'a', undefined, 2);
    s = m.ok ? m.state : s;
    expect(reserve(s, 'g', 'b', 100, undefined)).toMatchObject({ ok: false, reason: 'CacheFull' });
    s = unmount(s, 'v', 3);
    expect(reserve(s, 'g', 'b', 100, undefined)).toMatchObject({ ok: true, evicted: ['k'] });
  });

  it('reads a quota annotation as a byte quantity, and says when it cannot', () => {
    expect(parseQuota('10Gi')).toEqual({ bytes: 10 * 2 ** 30 });
    expect(parseQuota('500M')).toEqual({ bytes: 500e6 });
    expect(parseQuota('1024')).toEqual({ bytes: 1024 });
    expect(parseQuota(undefined)).toEqual({});
    expect(parseQuota('lots').invalid).toMatch(/not a byte quantity/);
  });
});
