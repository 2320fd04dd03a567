// The node's model cache on disk, the plugin's alone (docs/model-storage.md). Under its folder:
//   entries/<sha256>        verified artifacts, read-only, named by their sum
//   objects/<id>.json       which object (endpoint, bucket, key; ETag and size) gave which sum
//   parts/<id>[.etag]       bytes of a fetch under way, resumed after a kill
//   views/<volume>/<name>   a hard link to the entry under the artifact's own name, bound read-only into the Pod
//   mounts/<volume>.json    which entry a volume mounts, so a restarted plugin keeps it from eviction
// Every byte is accounted by src/core/model-cache.ts before it is written; one fetch per object at a time.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, link, mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  complete,
  emptyCache,
  holdLeftover,
  mount,
  mountedEntry,
  release,
  reserve,
  unmount as unmountEntry,
  usedBytes,
  type CacheState,
  type Refusal,
} from '../core/model-cache.js';
import type { ModelSource } from '../core/model-source.js';
import { fetchArtifact, FetchFailure, shown, type FetchProgress } from './download.js';
import type { ObjectSeen } from './store-question.js';
import { bindReadOnly, isMounted, unmount, type MountCommands } from './mounts.js';
import { objectIdentity, type StoreEnv } from './store-request.js';

export type Fetched = Extract<ModelSource, { kind: 's3' | 'https' }>;

interface Fetching {
  done: Promise<string>;
  progress?: FetchProgress;
  /** What the store said of the object to the Pod that started it, and that Pod's namespace. */
  seen: ObjectSeen;
  namespace: string;
}

interface ObjectRecord extends ObjectSeen {
  sha256: string;
}

interface RefusalRecord extends ObjectSeen, Refusal {
  at: number;
  quota?: number;
  capacity: number;
}

export interface NodeCacheOptions {
  dir: string;
  capacity: number;
  mounts: MountCommands;
  log: (line: Record<string, unknown>) => void;
  now?: () => number;
  /** How long a refusal of the cap stands before the object is tried again. */
  refusalMs?: number;
  /** How long a part no fetch resumes is kept. */
  partTtlMs?: number;
}

const idOf = (identity: string) => createHash('sha256').update(identity).digest('hex').slice(0, 40);
const json = async <T>(file: string) => JSON.parse(await readFile(file, 'utf8')) as T;
const sizeOf = (p: string) =>
  stat(p).then(
    (s) => s.size,
    () => 0,
  );

export class NodeCache {
  private state: CacheState;
  private readonly fetching = new Map<string, Fetching>();
  private readonly refused = new Map<string, RefusalRecord>();
  private readonly now: () => number;

  private constructor(private readonly o: NodeCacheOptions) {
    this.state = emptyCache(o.capacity);
    this.now = o.now ?? Date.now;
  }

  private folder = (name: string) => path.join(this.o.dir, name);

  /** Opens the cache: its entries, the parts a killed plugin left (still counted), the mounts it made. */
  static async open(o: NodeCacheOptions): Promise<NodeCache> {
    const cache = new NodeCache(o);
    for (const f of ['entries', 'objects', 'parts', 'views', 'mounts'])
      await mkdir(cache.folder(f), { recursive: true });
    for (const name of await readdir(cache.folder('entries'))) {
      if (!/^[0-9a-f]{64}$/.test(name)) continue;
      const s = await stat(path.join(cache.folder('entries'), name));
      cache.state = complete(cache.state, '', name, s.size, s.mtimeMs);
    }
    for (const name of await readdir(cache.folder('parts'))) {
      if (name.endsWith('.etag')) continue;
      const size = await sizeOf(path.join(cache.folder('parts'), name));
      // Counted until a fetch resumes it or the sweep deletes it.
      cache.state = holdLeftover(cache.state, name, '', size);
    }
    for (const name of await readdir(cache.folder('mounts'))) {
      const volume = name.replace(/\.json$/, '');
      const record = await json<{ key: string; namespace: string; target: string }>(
        path.join(cache.folder('mounts'), name),
      ).catch(() => undefined);
      if (record && record.key in cache.state.entries && (await isMounted(record.target))) {
        const m = mount(cache.state, record.key, volume, record.namespace, undefined, cache.now());
        if (m.ok) cache.state = m.state;
      } else await cache.forget(volume);
    }
    // Views of publishes a kill cut short before their record: no Pod started on them (the kubelet
    // publishes again, and a mount left at its target is taken down first), and their hard links
    // would keep evicted bytes on disk.
    for (const volume of await readdir(cache.folder('views')))
      if (!mountedEntry(cache.state, volume)) await rm(path.join(cache.folder('views'), volume), { recursive: true });
    setInterval(
      () => void cache.sweepParts().catch((err: Error) => o.log({ msg: 'sweeping parts failed', err: err.message })),
      60_000,
    ).unref();
    o.log({
      msg: 'model cache opened',
      entries: Object.keys(cache.state.entries).length,
      used: usedBytes(cache.state),
    });
    return cache;
  }

  /**
   * The entry holding the object the Pod may read, fetched if the node has no verified copy of that
   * object as the store serves it now. Resolves `undefined` while a fetch is still under way after
   * `waitMs` (its progress is in `progressOf`).
   */
  async entryFor(
    a: { source: Fetched; env: StoreEnv; seen: ObjectSeen; namespace: string; quota?: number },
    waitMs: number,
  ): Promise<string | undefined> {
    const identity = objectIdentity(a.source, a.env);
    const id = idOf(identity);
    const record = await json<ObjectRecord>(path.join(this.folder('objects'), `${id}.json`)).catch(() => undefined);
    const same =
      record && record.etag !== '' && a.seen.size >= 0 && record.etag === a.seen.etag && record.size === a.seen.size;
    // The node has this object's bytes as the store serves them now: verified, nothing to fetch.
    if (same && record.sha256 in this.state.entries) return this.heldTo(a.source, record.sha256);
    this.refuseAgain(id, a);
    let f = this.fetching.get(id);
    if (!f) {
      const started: Fetching = { done: Promise.resolve(''), seen: a.seen, namespace: a.namespace };
      started.done = this.fetch(id, a, started).finally(() => this.fetching.delete(id));
      this.fetching.set(id, started);
      f = started;
    } else if (f.seen.etag !== a.seen.etag || f.seen.size !== a.seen.size || a.seen.size < 0) {
      // Only the same object as the store serves it to this Pod joins a fetch under way.
      throw new FetchFailure('retrying', `${shown(a.source.uri)}: the object changed while the node fetched it`);
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), waitMs)));
    let key: string | undefined;
    try {
      key = await Promise.race([f.done, late]);
    } catch (err) {
      // Another namespace's failure (its quota, its credentials) is not this Pod's: this Pod's store
      // answered its own question, and its own fetch comes at the kubelet's next try.
      if (f.namespace !== a.namespace)
        throw new FetchFailure('retrying', `${shown(a.source.uri)}: another Pod's fetch of this object stopped`);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return key && this.heldTo(a.source, key);
  }

  /** The entry, if its sum is the one the Pod's spec gives (or the spec gives none); a mismatch is never served. */
  private heldTo(source: Fetched, key: string): string {
    if (source.sha256 && key !== source.sha256)
      throw new FetchFailure(
        'unavailable',
        `${shown(source.uri)}: checksum mismatch: spec.sha256 is ${source.sha256}, the artifact's is ${key}`,
      );
    return key;
  }

  progressOf(source: Fetched, env: StoreEnv): FetchProgress | undefined {
    return this.fetching.get(idOf(objectIdentity(source, env)))?.progress;
  }

  /** A refusal of the same object as the store serves it, still standing: said again without a byte fetched. */
  private refuseAgain(id: string, a: { seen: ObjectSeen; namespace: string; quota?: number }): void {
    const r = this.refused.get(`${id}/${a.namespace}`) ?? this.refused.get(id);
    if (!r || r.etag !== a.seen.etag || r.size !== a.seen.size) return;
    const stands =
      r.reason === 'QuotaExceeded'
        ? r.quota === a.quota
        : r.capacity === this.o.capacity && this.now() - r.at < (this.o.refusalMs ?? 600_000);
    if (stands) throw new FetchFailure(r.reason, r.message);
    this.refused.delete(r.reason === 'QuotaExceeded' ? `${id}/${a.namespace}` : id);
  }

  private async fetch(
    id: string,
    a: { source: Fetched; env: StoreEnv; seen: ObjectSeen; namespace: string; quota?: number },
    f: Fetching,
  ): Promise<string> {
    const part = path.join(this.folder('parts'), id);
    // A part an earlier attempt left is this fetch's now, charged to its namespace as it is resumed.
    this.state = release(this.state, id);
    try {
      const result = await fetchArtifact({
        source: a.source,
        part,
        env: a.env,
        admit: (bytes) => this.admit(id, a.namespace, bytes, a.quota),
        expectedSize: a.seen.size,
        progress: (p) => (f.progress = p),
      });
      const entry = path.join(this.folder('entries'), result.sha256);
      if (result.sha256 in this.state.entries) {
        // Counted as the entry that is there before any await, so no eviction meanwhile takes it.
        this.state = complete(this.state, id, result.sha256, result.size, this.now());
        await rm(part, { force: true });
      } else {
        await chmod(part, 0o444);
        await rename(part, entry);
        this.state = complete(this.state, id, result.sha256, result.size, this.now());
      }
      const record: ObjectRecord = { etag: result.etag, size: result.size, sha256: result.sha256 };
      await writeFile(path.join(this.folder('objects'), `${id}.json.tmp`), JSON.stringify(record));
      await rename(
        path.join(this.folder('objects'), `${id}.json.tmp`),
        path.join(this.folder('objects'), `${id}.json`),
      );
      this.o.log({
        msg: 'fetched and verified',
        uri: shown(a.source.uri),
        fetched: result.fetched,
        resumed: result.resumed,
        size: result.size,
        sha256: result.sha256,
      });
      return result.sha256;
    } catch (err) {
      // A part kept for a resume stays counted, charged to its namespace until it is resumed or swept;
      // one that cannot be resumed (no ETag) is deleted.
      if (!existsSync(`${part}.etag`)) await rm(part, { force: true });
      const kept = await sizeOf(part);
      this.state = release(this.state, id);
      if (kept > 0) this.state = holdLeftover(this.state, id, a.namespace, kept);
      // The oldest refusal goes first: the memory is bounded, whatever tenants ask for.
      if (this.refused.size >= 4096) this.refused.delete(this.refused.keys().next().value!);
      if (err instanceof FetchFailure && (err.kind === 'CacheFull' || err.kind === 'QuotaExceeded'))
        // A quota is one namespace's: its refusal is that namespace's alone.
        this.refused.set(err.kind === 'QuotaExceeded' ? `${id}/${a.namespace}` : id, {
          ...a.seen,
          reason: err.kind,
          message: err.message,
          at: this.now(),
          quota: a.quota,
          capacity: this.o.capacity,
        });
      throw err;
    }
  }

  private admit(id: string, namespace: string, bytes: number, quota: number | undefined): Refusal | undefined {
    const r = reserve(this.state, id, namespace, bytes, quota);
    if (!r.ok) return r;
    this.state = r.state;
    for (const key of r.evicted) {
      this.o.log({ msg: 'evicted an entry no Pod mounts', sha256: key });
      rm(path.join(this.folder('entries'), key), { force: true }).catch((err: Error) =>
        this.o.log({ msg: 'an evicted entry could not be deleted', sha256: key, err: err.message }),
      );
    }
    return undefined;
  }

  /**
   * Parts no fetch has resumed for `partTtlMs` (the object never asked for again): deleted, their bytes
   * free. Runs every minute.
   */
  async sweepParts(): Promise<void> {
    for (const name of await readdir(this.folder('parts'))) {
      if (name.endsWith('.etag') || this.fetching.has(name)) continue;
      const file = path.join(this.folder('parts'), name);
      const age =
        this.now() -
        (await stat(file).then(
          (s) => s.mtimeMs,
          () => this.now(),
        ));
      if (age < (this.o.partTtlMs ?? 600_000)) continue;
      await rm(file, { force: true });
      await rm(`${file}.etag`, { force: true });
      this.state = release(this.state, name);
      this.o.log({ msg: 'deleted a part no fetch resumed', part: name });
    }
  }

  /** Mounts the entry read-only at the kubelet's target, under the artifact's name; charged to the Pod's namespace. */
  async publish(p: {
    key: string;
    volume: string;
    namespace: string;
    quota?: number;
    target: string;
    name: string;
  }): Promise<void> {
    // Evicted since it was found (another fetch made room): the kubelet's next try finds or fetches it.
    if (!(p.key in this.state.entries))
      throw new FetchFailure('retrying', `the cache entry ${p.key} was evicted before it was mounted`);
    // A volume published again (its object changed) lets go of the entry it had.
    const m = mount(unmountEntry(this.state, p.volume, this.now()), p.key, p.volume, p.namespace, p.quota, this.now());
    if (!m.ok) throw new FetchFailure(m.reason, m.message);
    this.state = m.state;
    try {
      // A mount an earlier attempt made and did not record (a kill between the two): taken down first.
      while (await isMounted(p.target)) await unmount(this.o.mounts, p.target);
      const view = path.join(this.folder('views'), p.volume);
      await rm(view, { recursive: true, force: true });
      await mkdir(view, { recursive: true });
      await link(path.join(this.folder('entries'), p.key), path.join(view, p.name));
      await mkdir(p.target, { recursive: true });
      await bindReadOnly(this.o.mounts, view, p.target);
      const record = { key: p.key, namespace: p.namespace, target: p.target };
      await writeFile(path.join(this.folder('mounts'), `${p.volume}.json`), JSON.stringify(record));
    } catch (err) {
      if (await isMounted(p.target)) await unmount(this.o.mounts, p.target).catch(() => undefined);
      await this.forget(p.volume);
      throw err;
    }
  }

  /** Whether the volume is published already at that target (the kubelet asks again after a timeout). */
  async published(volume: string, target: string): Promise<boolean> {
    const record = await json<{ target: string }>(path.join(this.folder('mounts'), `${volume}.json`)).catch(
      () => undefined,
    );
    return record?.target === target && mountedEntry(this.state, volume) !== undefined && (await isMounted(target));
  }

  async unpublish(volume: string, target: string): Promise<void> {
    if (await isMounted(target)) await unmount(this.o.mounts, target);
    // The empty folder the kubelet made; never recursive, so a mount left in place is never emptied.
    await rmdir(target).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
    await this.forget(volume);
  }

  private async forget(volume: string): Promise<void> {
    this.state = unmountEntry(this.state, volume, this.now());
    await rm(path.join(this.folder('views'), volume), { recursive: true, force: true });
    await rm(path.join(this.folder('mounts'), `${volume}.json`), { force: true });
  }
}
