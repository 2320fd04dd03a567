import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  installQueues,
  layoutTag,
  maxShards,
  mayMoveTo,
  namespaceHash,
  shardOf,
  shardRange,
  shardSelector,
  shardTaskQueue,
  type ShardLayout,
} from '../../src/core/shards.js';

const inRange = (hash: bigint, r: { start: string; end: string }) => hash >= BigInt(r.start) && hash < BigInt(r.end);

describe('shards of the namespace hash', () => {
  it("hashes as the apiserver does (Go's hash/fnv New64a, values printed by Go)", () => {
    const go: [string, string][] = [
      ['', 'cbf29ce484222325'],
      ['default', 'ebada5168620c5fe'],
      ['kube-system', 'df65c7bc1d82b35e'],
      ['bench-ns-0', '60811a2ae1f693f2'],
      ['tenant-a', 'c2ef8128e3eb9efb'],
      ['models-ü', '4f218c1dbfdb83ad'],
    ];
    for (const [ns, hex] of go) expect(namespaceHash(ns).toString(16).padStart(16, '0'), ns).toBe(hex);
  });

  it("writes ranges as the apiserver's parser takes them: 16 hex digits, 2^64 as the last end", () => {
    expect(shardRange(0, 2)).toEqual({ start: '0x0000000000000000', end: '0x8000000000000000' });
    expect(shardRange(1, 2)).toEqual({ start: '0x8000000000000000', end: '0x10000000000000000' });
    expect(shardRange(2, 3).start).toBe('0xaaaaaaaaaaaaaaab');
  });

  it("with the apiserver's hash, puts every namespace in exactly one shard, the one whose range holds its hash", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 63 }), fc.integer({ min: 1, max: 64 }), (ns, count) => {
        const hash = namespaceHash(ns);
        const holders = [...Array(count).keys()].filter((k) => inRange(hash, shardRange(k, count)));
        expect(holders).toEqual([shardOf(ns, { count, hash: 'apiserver' })]);
      }),
    );
  });

  it('with the mixed hash, puts every namespace in one of the shards', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 63 }), fc.integer({ min: 1, max: 64 }), (ns, count) => {
        const shard = shardOf(ns, { count, hash: 'mixed' });
        expect(Number.isInteger(shard) && shard >= 0 && shard < count).toBe(true);
      }),
    );
  });

  /** How many of `names` fall on each of 4 shards. */
  const spread = (names: string[], hash: ShardLayout['hash']) => {
    const counts = [0, 0, 0, 0];
    for (const ns of names) counts[shardOf(ns, { count: 4, hash })]!++;
    return counts;
  };
  const numbered = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

  it("spreads names that differ only at the end, which the apiserver's hash puts on one or two shards", () => {
    for (const prefix of ['tenant-', 'team-', 'informer-', 'bench-operator-adb408-']) {
      const apiserver = spread(numbered(prefix, 100), 'apiserver');
      expect(apiserver.filter((n) => n > 0).length, `${prefix}: ${apiserver}`).toBeLessThanOrEqual(2);
      // 25 each on average; a fair split of 100 keeps every shard within 15..35 (about 2.3 standard deviations).
      const mixed = spread(numbered(prefix, 100), 'mixed');
      for (const n of mixed) expect(n, `${prefix}: ${mixed}`).toBeGreaterThanOrEqual(15);
      for (const n of mixed) expect(n, `${prefix}: ${mixed}`).toBeLessThanOrEqual(35);
    }
    // Pinned, as docs/scaling.md quotes them: another mixer would spread these too, differently.
    expect(spread(numbered('tenant-', 100), 'mixed')).toEqual([19, 29, 24, 28]);
    expect(spread(numbered('tenant-', 100), 'apiserver')).toEqual([90, 0, 0, 10]);
    // The benchmark's 16 namespaces, which fell on 2 shards of one replica with the apiserver's hash.
    expect(spread(numbered('bench-operator-adb408-', 16), 'mixed').every((n) => n >= 2)).toBe(true);
  });

  it('names the Leases of each layout apart, so replicas of another count or hash never share one', () => {
    expect(layoutTag({ count: 4, hash: 'apiserver' })).toBe('4');
    expect(layoutTag({ count: 4, hash: 'mixed' })).toBe('4m');
  });

  it('selects the owned shards, adjacent ranges merged; nothing to select for all of them', () => {
    expect(shardSelector([3, 0, 1], 4)).toBe(
      "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000') || " +
        "shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')",
    );
    expect(shardSelector([0, 1, 2, 3], 4)).toBe('');
    expect(shardTaskQueue('machinemodel-operator', 3)).toBe('machinemodel-operator/shard-3');
  });
});

describe('the queues a model workflow may move to (moveToTaskQueue)', () => {
  const base = 'machinemodel-operator';
  it('moves between the base queue and every shard queue of its install, in either direction', () => {
    expect(mayMoveTo(`${base}/shard-3`, base)).toBe(true);
    expect(mayMoveTo(base, `${base}/shard-3`)).toBe(true);
    expect(mayMoveTo(`${base}/shard-0`, `${base}/shard-63`)).toBe(true);
    expect(installQueues(base)).toHaveLength(maxShards + 1);
  });

  it('refuses its own queue, another install’s, a shard past the last, and names that only look like one', () => {
    expect(mayMoveTo(base, base)).toBe(false);
    expect(mayMoveTo(`${base}/shard-1`, `${base}/shard-1`)).toBe(false);
    expect(mayMoveTo('other-operator/shard-1', base)).toBe(false);
    expect(mayMoveTo(`${base}/shard-${maxShards}`, base)).toBe(false);
    for (const forged of [`${base}/shard-01`, `${base}/shard-1/shard-1`, `${base}/shard-`, `${base}x`, ''])
      expect(mayMoveTo(forged, `${base}/shard-2`)).toBe(false);
  });

  it('never leaves the install, whatever the target (property)', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: maxShards - 1 }),
        fc.oneof(
          fc.string(),
          fc.nat({ max: 2 * maxShards }).map((j) => `${base}/shard-${j}`),
        ),
        (k, target) => {
          if (!mayMoveTo(target, shardTaskQueue(base, k))) return;
          const shard = /^machinemodel-operator\/shard-(0|[1-9]\d*)$/.exec(target)?.[1];
          expect(target === base || Number(shard) < maxShards).toBe(true);
        },
      ),
    );
  });
});
