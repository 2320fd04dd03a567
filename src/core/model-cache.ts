// The node's model cache, as bytes to account for (docs/model-storage.md). Pure: the CSI plugin
// (src/csi/) asks before it writes a byte and deletes what an answer evicts.
//
// Bytes on the node are the cap's: verified entries (by sha256), and fetches under way, whose
// bytes so far (or whole size, when the store said it) are reserved. A namespace is charged the
// whole size of each entry its Pods mount and of each fetch it started, so a tenant's quota bounds
// what it holds however the entries are shared. Room is made by evicting the least recently used
// entries that no Pod mounts; an entry a Pod mounts is never evicted.
import { parseQuantity } from './validation.js';

export interface CacheEntry {
  size: number;
  /** When a Pod last mounted or let go of it (the plugin's clock, milliseconds). */
  lastUsed: number;
  /** The volumes that mount it (volume id → namespace of the Pod). */
  mounts: Record<string, string>;
}

export interface CacheFetch {
  namespace: string;
  /** Bytes held for it: the whole size when known, else what has arrived. */
  reserved: number;
}

export interface CacheState {
  /** The cap on the cache's bytes. */
  capacity: number;
  entries: Record<string, CacheEntry>;
  fetches: Record<string, CacheFetch>;
}

export type Refusal = { reason: 'CacheFull' | 'QuotaExceeded'; message: string };
export type Admission = { ok: true; state: CacheState; evicted: string[] } | ({ ok: false } & Refusal);

export const emptyCache = (capacity: number): CacheState => ({ capacity, entries: {}, fetches: {} });

/** Bytes the cache holds or has promised: entries and fetches. */
export function usedBytes(s: CacheState): number {
  let used = 0;
  for (const e of Object.values(s.entries)) used += e.size;
  for (const f of Object.values(s.fetches)) used += f.reserved;
  return used;
}

/** What a namespace is charged: each entry its Pods mount and each fetch it started, once. */
export function namespaceBytes(s: CacheState, namespace: string): number {
  let used = 0;
  for (const e of Object.values(s.entries)) if (Object.values(e.mounts).includes(namespace)) used += e.size;
  for (const f of Object.values(s.fetches)) if (f.namespace === namespace) used += f.reserved;
  return used;
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

function quotaRefusal(namespace: string, charged: number, more: number, quota: number): Refusal {
  return {
    reason: 'QuotaExceeded',
    message:
      `namespace ${namespace} may hold ${mib(quota)} in the node's model cache; it holds ${mib(charged)} ` +
      `and this artifact needs ${mib(more)} more`,
  };
}

/**
 * Makes room for `more` bytes: evicts entries no Pod mounts, least recently used first, until the
 * cache holds at most its capacity. Refused (nothing evicted) when even that is not enough.
 */
function makeRoom(s: CacheState, more: number): Admission {
  let used = usedBytes(s) + more;
  if (used <= s.capacity) return { ok: true, state: s, evicted: [] };
  const idle = Object.entries(s.entries)
    .filter(([, e]) => Object.keys(e.mounts).length === 0)
    .sort(([ka, a], [kb, b]) => a.lastUsed - b.lastUsed || (ka < kb ? -1 : 1));
  const evicted: string[] = [];
  for (const [key, e] of idle) {
    if (used <= s.capacity) break;
    evicted.push(key);
    used -= e.size;
  }
  if (used > s.capacity)
    return {
      ok: false,
      reason: 'CacheFull',
      message:
        `the node's model cache (${mib(s.capacity)}) cannot hold ${mib(more)} more: ` +
        `${mib(usedBytes(s))} are in use by Pods or fetches under way`,
    };
  const entries = { ...s.entries };
  for (const key of evicted) delete entries[key];
  return { ok: true, state: { ...s, entries }, evicted };
}

/**
 * A fetch asks for its bytes: at its start (the size the store said, or 0 when unknown) and as they
 * arrive past what it holds. Refused when the namespace's quota or the cache's capacity cannot take them.
 * A fetch stays charged to the namespace that started it (Pods of another that wait for the same
 * object are charged when they mount it); `quota` is that namespace's.
 */
export function reserve(
  s: CacheState,
  fetch: string,
  starter: string,
  bytes: number,
  quota: number | undefined,
): Admission {
  const namespace = s.fetches[fetch]?.namespace ?? starter;
  const held = s.fetches[fetch]?.reserved ?? 0;
  const more = Math.max(bytes - held, 0);
  if (quota !== undefined && more > 0) {
    const charged = namespaceBytes(s, namespace);
    if (charged + more > quota) return { ok: false, ...quotaRefusal(namespace, charged, more, quota) };
  }
  const room = makeRoom(s, more);
  if (!room.ok) return room;
  const fetches = { ...room.state.fetches, [fetch]: { namespace, reserved: Math.max(held, bytes) } };
  return { ok: true, state: { ...room.state, fetches }, evicted: room.evicted };
}

/**
 * Bytes already on the node that stay counted whatever the cap says: the part a fetch left for a
 * resume (charged to its namespace; '' for a part an earlier run of the plugin left).
 */
export function holdLeftover(s: CacheState, fetch: string, namespace: string, bytes: number): CacheState {
  return { ...s, fetches: { ...s.fetches, [fetch]: { namespace, reserved: bytes } } };
}

/** A fetch that ended without an entry (failed, refused, killed): its bytes are free again. */
export function release(s: CacheState, fetch: string): CacheState {
  if (!(fetch in s.fetches)) return s;
  const fetches = { ...s.fetches };
  delete fetches[fetch];
  return { ...s, fetches };
}

/**
 * A fetch verified its bytes as entry `key` of `size` bytes. An entry of the same bytes that is there
 * already is kept (the plugin drops the copy); either way the fetch's reservation ends.
 */
export function complete(s: CacheState, fetch: string, key: string, size: number, now: number): CacheState {
  const rest = release(s, fetch);
  if (key in rest.entries) return rest;
  return { ...rest, entries: { ...rest.entries, [key]: { size, lastUsed: now, mounts: {} } } };
}

/** A Pod's volume mounts entry `key`: charged to its namespace unless that namespace mounts it already. */
export function mount(
  s: CacheState,
  key: string,
  volume: string,
  namespace: string,
  quota: number | undefined,
  now: number,
): { ok: true; state: CacheState } | ({ ok: false } & Refusal) {
  const entry = s.entries[key];
  if (!entry) throw new Error(`no cache entry ${key}`);
  const charged = Object.values(entry.mounts).includes(namespace) ? 0 : entry.size;
  if (quota !== undefined && charged > 0) {
    const held = namespaceBytes(s, namespace);
    if (held + charged > quota) return { ok: false, ...quotaRefusal(namespace, held, charged, quota) };
  }
  const mounts = { ...entry.mounts, [volume]: namespace };
  return { ok: true, state: { ...s, entries: { ...s.entries, [key]: { ...entry, mounts, lastUsed: now } } } };
}

/** A Pod's volume lets go: the entry stays, evictable once no Pod mounts it. */
export function unmount(s: CacheState, volume: string, now: number): CacheState {
  for (const [key, entry] of Object.entries(s.entries)) {
    if (!(volume in entry.mounts)) continue;
    const mounts = { ...entry.mounts };
    delete mounts[volume];
    return { ...s, entries: { ...s.entries, [key]: { ...entry, mounts, lastUsed: now } } };
  }
  return s;
}

/** The entry a volume mounts, if any. */
export function mountedEntry(s: CacheState, volume: string): string | undefined {
  return Object.entries(s.entries).find(([, e]) => volume in e.mounts)?.[0];
}

/**
 * A namespace's quota from its annotation: bytes as a Kubernetes quantity ("10Gi", "500M", "1073741824").
 * Undefined without one; a value that does not parse is no quota at all (`invalid` says so).
 */
export function parseQuota(text: string | undefined): { bytes?: number; invalid?: string } {
  if (text === undefined || text.trim() === '') return {};
  const bytes = parseQuantity(text.trim());
  if (bytes === undefined || !Number.isFinite(bytes) || bytes < 0)
    return { invalid: `"${text}" is not a byte quantity (for example 10Gi)` };
  return { bytes: Math.floor(bytes) };
}

/** The annotation on a Namespace that bounds what its Pods may hold in each node's model cache. */
export const cacheQuotaAnnotation = 'stable.example.com/model-cache-quota';
