import { describe, expect, it } from 'vitest';
import { shardOf } from '../../src/core/shards.js';
import { ShardScope } from '../../src/sharding/shard-scope.js';

const names = Array.from({ length: 40 }, (_, i) => `tenant-${i}`);

describe('what a sharded informer keeps and asks the apiserver for', () => {
  it("asks the apiserver for its shards only with the apiserver's hash, and only where it applies them", () => {
    expect(new ShardScope({ count: 4, hash: 'apiserver', owned: [0, 1] }, true).selector).toContain('shardRange(');
    expect(new ShardScope({ count: 4, hash: 'apiserver', owned: [0, 1] }, false).selector).toBe('');
    // The apiserver cannot select on the mixed hash: a selector would keep the wrong namespaces.
    expect(new ShardScope({ count: 4, hash: 'mixed', owned: [0, 1] }, true).selector).toBe('');
  });

  it("keeps exactly its shards' namespaces, by the layout's hash", () => {
    for (const hash of ['mixed', 'apiserver'] as const) {
      const scope = new ShardScope({ count: 4, hash, owned: [1, 2] });
      for (const ns of names)
        expect(scope.keeps(ns), `${hash} ${ns}`).toBe([1, 2].includes(shardOf(ns, { count: 4, hash })));
    }
  });

  it('is another scope when the hash differs, so a change of hash re-lists', () => {
    const mixed = new ShardScope({ count: 4, hash: 'mixed', owned: [0] });
    expect(mixed.sameAs(new ShardScope({ count: 4, hash: 'mixed', owned: [0] }))).toBe(true);
    expect(mixed.sameAs(new ShardScope({ count: 4, hash: 'apiserver', owned: [0] }))).toBe(false);
  });
});
