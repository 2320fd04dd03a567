// Shards of the namespace hash: a model and its children share a namespace, so the replica that owns
// a namespace's shard sees all of them. Two ways to draw a namespace's shard from its name:
// - 'apiserver': the apiserver's own hash and ranges (KEP-5866, k8s.io/apimachinery/pkg/sharding),
//   64-bit FNV-1a of the field, ranges [start, end) in 0x-prefixed 16-digit hex, so a server-side
//   `shardSelector` and the client-side filter agree to the object. FNV-1a carries a name's last
//   characters into its low bits only, so `team-1` to `team-9` share a shard;
// - 'mixed' (the default): the same hash with every bit stirred into every other, so names alike spread
//   evenly; the apiserver cannot select on it, and each replica filters what it receives.

const space = 1n << 64n;
const fnvOffset = 0xcbf29ce484222325n;
const fnvPrime = 0x100000001b3n;
const mask = space - 1n;

/** 64-bit FNV-1a of the namespace's UTF-8 bytes, as Go's hash/fnv New64a. */
export function namespaceHash(namespace: string): bigint {
  let h = fnvOffset;
  for (const byte of new TextEncoder().encode(namespace)) h = ((h ^ BigInt(byte)) * fnvPrime) & mask;
  return h;
}

/** The first hash of shard k of `count`: ceil(k·2⁶⁴/count), so that shardOf agrees with the ranges. */
function startOf(k: number, count: number): bigint {
  const n = BigInt(k) * space;
  const c = BigInt(count);
  return (n + c - 1n) / c;
}

export type ShardHash = 'mixed' | 'apiserver';
export const shardHashes: readonly ShardHash[] = ['mixed', 'apiserver'];

/** How namespaces fall into shards: how many, and which hash draws them. */
export interface ShardLayout {
  count: number;
  hash: ShardHash;
}

/**
 * MurmurHash3's 64-bit finalizer (fmix64): a bijection in which each input bit flips each output bit
 * with probability about 1/2. Written out: src/core imports no package, and it is five operations.
 */
function fmix64(h: bigint): bigint {
  h ^= h >> 33n;
  h = (h * 0xff51afd7ed558ccdn) & mask;
  h ^= h >> 33n;
  h = (h * 0xc4ceb9fe1a85ec53n) & mask;
  return h ^ (h >> 33n);
}

export function shardOf(namespace: string, layout: ShardLayout): number {
  const hash = namespaceHash(namespace);
  return Number(((layout.hash === 'mixed' ? fmix64(hash) : hash) * BigInt(layout.count)) / space);
}

function hex(n: bigint): string {
  return n === space ? '0x10000000000000000' : `0x${n.toString(16).padStart(16, '0')}`;
}

/** Shard k's hash range as the apiserver's shardRange() takes it (the 'apiserver' hash). */
export function shardRange(k: number, count: number): { start: string; end: string } {
  return { start: hex(startOf(k, count)), end: hex(startOf(k + 1, count)) };
}

/**
 * The list/watch `shardSelector` for a set of shards of the 'apiserver' hash: adjacent shards merged
 * into one range. Empty for every shard (no selector needed) and for none (the caller watches nothing).
 */
export function shardSelector(shards: Iterable<number>, count: number): string {
  const owned = [...new Set(shards)].filter((k) => k >= 0 && k < count).sort((a, b) => a - b);
  if (owned.length === 0 || owned.length === count) return '';
  const ranges: [number, number][] = [];
  for (const k of owned) {
    const last = ranges.at(-1);
    if (last && last[1] === k) last[1] = k + 1;
    else ranges.push([k, k + 1]);
  }
  return ranges
    .map(([from, to]) => {
      const start = shardRange(from, count).start;
      const end = shardRange(to - 1, count).end;
      return `shardRange(object.metadata.namespace, '${start}', '${end}')`;
    })
    .join(' || ');
}

/** The layout's part of the shards' Lease names: replicas of another layout never share a Lease. */
export function layoutTag(layout: ShardLayout): string {
  return `${layout.count}${layout.hash === 'mixed' ? 'm' : ''}`;
}

/** Each shard a replica holds is a Temporal worker of its own (its own queue, cache and workflow thread). */
export const maxShards = 64;

/** The task queue of shard k: each shard's workflows and activities run on the replica that owns it. */
export function shardTaskQueue(base: string, k: number): string {
  return `${base}/shard-${k}`;
}

/** Every queue an install of this base queue may run model workflows on, whatever its layout. */
export function installQueues(base: string): string[] {
  return [base, ...Array.from({ length: maxShards }, (_, k) => shardTaskQueue(base, k))];
}

/**
 * Whether a workflow on queue `current` may move to `target` (a `moveToTaskQueue` signal): only to
 * another queue of the same install. Anything that reaches Temporal can send the signal, and a queue
 * of its choosing would hand the workflow to a worker of its own.
 */
export function mayMoveTo(target: string, current: string): boolean {
  const base = current.replace(/\/shard-(0|[1-9]\d*)$/, '');
  return target !== current && installQueues(base).includes(target);
}
