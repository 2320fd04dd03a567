// The node's model cache on disk, the plugin's alone (docs/model-storage.md). Under its folder:
//   entries/<sha256>        verified artifacts, read-only, named by their sum
//   objects/<id>.json       which object (endpoint, bucket, key; ETag and size) gave which sum
//   parts/<id>[.etag]       bytes of a fetch under way, resumed after a kill
//   views/<volume>/<name>   a hard link to the entry under the artifact's own name, bound read-only into the Pod
//   mounts/<volume>.json    which entry a volume mounts, so a restarted plugin keeps it from eviction
// Every byte is accounted by src/core/model-cache.ts before it is written; one fetch per object at a time.
import { createHash } from 'node:crypto';
import { chmod, link, mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { request, type Dispatcher } from 'undici';
import {
  complete,
  emptyCache,
  mount,
  mountedEntry,
  release,
  reserve,
  unmount as unmountEntry,
  usedBytes,
  type CacheState,
  type Refusal,
} from '../core/model-cache.js';
import { fetchFailureKind, type ModelSource } from '../core/model-source.js';
import { fetchArtifact, FetchFailure, shown } from './download.js';
import { bindReadOnly, isMounted, unmount, type MountCommands } from './mounts.js';
import { objectIdentity, storeMessage, storeRequest, type StoreEnv } from './store-request.js';

export type Fetched = Extract<ModelSource, { kind: 's3' | 'https' }>;

/** What the store says of an object to the Pod's credentials: it serves it, this long, with this ETag. */
export interface ObjectSeen {
  etag: string;
  size: number;
}

export interface FetchProgress {
  bytes: number;
  total?: number;
  rate: number;
}

interface Fetching {
  done: Promise<string>;
  progress?: FetchProgress;
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
}

const idOf = (identity: string) => createHash('sha256').update(identity).digest('hex').slice(0, 40);
const json = async <T>(file: string) => JSON.parse(await readFile(file, 'utf8')) as T;
const sizeOf = (p: string) =>
  stat(p).then(
    (s) => s.size,
    () => 0,
  );

/** Up to `limit` bytes of a body as text; the rest is not read (the connection is closed). */
async function boundedText(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= limit) break;
    }
  } catch {
    // A body that broke off says what it said so far.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

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
      const r = reserve(cache.state, name, '', size, undefined);
      // A part the cap has no room for is not worth resuming.
      if (r.ok) cache.state = r.state;
      else await rm(path.join(cache.folder('parts'), name), { force: true });
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
    o.log({
      msg: 'model cache opened',
      entries: Object.keys(cache.state.entries).length,
      used: usedBytes(cache.state),
    });
    return cache;
  }

  get used(): number {
    return usedBytes(this.state);
  }

  /**
   * Asks the store, with the Pod's own credentials, whether it serves the object: a one-byte read,
   * whose answer carries its ETag and size. A refusal is the store's own words.
   */
  async probe(source: Fetched, env: StoreEnv): Promise<ObjectSeen> {
    const req = storeRequest(source, 0, env, 0);
    const res = await request(req.url, {
      method: 'GET',
      headers: req.headers,
      headersTimeout: 15_000,
      bodyTimeout: 15_000,
    }).catch((err: unknown) => {
      throw new FetchFailure('retrying', `${shown(source.uri)}: cannot reach the store: ${(err as Error).message}`);
    });
    const etag = typeof res.headers.etag === 'string' ? res.headers.etag : '';
    const total = /\/(\d+)$/.exec(String(res.headers['content-range'] ?? ''))?.[1];
    const ok = res.statusCode === 206 || res.statusCode === 200 || (res.statusCode === 416 && total === '0');
    // The store's answer is the tenant's to choose: a few KiB of it at most (a refusal's words), never
    // a body a store that ignores the Range streams without end.
    const body = await boundedText(res.body, ok ? 0 : 16 * 1024);
    if (res.statusCode === 206 || (res.statusCode === 416 && total === '0'))
      return { etag, size: Number(total ?? NaN) };
    if (res.statusCode === 200) return { etag, size: Number(res.headers['content-length'] ?? NaN) };
    throw new FetchFailure(
      fetchFailureKind(res.statusCode),
      `${shown(source.uri)}: ${storeMessage(res.statusCode, body)}`,
    );
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
    const same = record && record.etag !== '' && record.etag === a.seen.etag && record.size === a.seen.size;
    // The node has this object's bytes as the store serves them now: verified, nothing to fetch.
    if (same && record.sha256 in this.state.entries) return this.heldTo(a.source, record.sha256);
    this.refuseAgain(id, a);
    let f = this.fetching.get(id);
    if (!f) {
      const started: Fetching = { done: Promise.resolve('') };
      started.done = this.fetch(id, a, started).finally(() => this.fetching.delete(id));
      this.fetching.set(id, started);
      f = started;
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), waitMs)));
    let key: string | undefined;
    try {
      key = await Promise.race([f.done, late]);
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
    // A part a killed plugin left is this fetch's now.
    const left = this.state.fetches[id];
    if (left && left.namespace === '') this.state = release(this.state, id);
    try {
      const result = await fetchArtifact({
        source: a.source,
        part,
        env: a.env,
        admit: (bytes) => this.admit(id, a.namespace, bytes, a.quota),
        progress: (p) => (f.progress = p),
      });
      const entry = path.join(this.folder('entries'), result.sha256);
      if (result.sha256 in this.state.entries) await rm(part, { force: true });
      else {
        await chmod(part, 0o444);
        await rename(part, entry);
      }
      this.state = complete(this.state, id, result.sha256, result.size, this.now());
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
      // A part kept for a resume keeps its bytes counted; anything else is free again.
      const kept = await sizeOf(part);
      this.state = release(this.state, id);
      if (kept > 0) {
        const r = reserve(this.state, id, '', kept, undefined);
        if (r.ok) this.state = r.state;
      }
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
      void rm(path.join(this.folder('entries'), key), { force: true });
    }
    return undefined;
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
    const m = mount(this.state, p.key, p.volume, p.namespace, p.quota, this.now());
    if (!m.ok) throw new FetchFailure(m.reason, m.message);
    this.state = m.state;
    try {
      const view = path.join(this.folder('views'), p.volume);
      await rm(view, { recursive: true, force: true });
      await mkdir(view, { recursive: true });
      await link(path.join(this.folder('entries'), p.key), path.join(view, p.name));
      await mkdir(p.target, { recursive: true });
      await bindReadOnly(this.o.mounts, view, p.target);
      const record = { key: p.key, namespace: p.namespace, target: p.target };
      await writeFile(path.join(this.folder('mounts'), `${p.volume}.json`), JSON.stringify(record));
    } catch (err) {
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
