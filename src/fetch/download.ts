// Fetches an artifact into the node's cache, resuming what an earlier attempt left. The fetcher's own
// files live in the folder's hidden `.fetch/` (no artifact name starts with a dot): the bytes arrive
// in `<name>.part` (kept across a killed Pod) and continue from its size with a Range request, but
// only while the store still has the object they came from (If-Range with its ETag). Before the part
// is renamed to the file the model reads, its size is checked, it is flushed to disk, and with a sum
// the bytes on disk are hashed: a mismatch deletes the part, so the bytes are never served.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { request } from 'undici';
import { fetchFailureKind, type FetchFailureKind, type ModelSource } from '../core/model-source.js';
import { takeLock, type CacheLock } from './cache-lock.js';
import { storeMessage, storeRequest } from './store-request.js';

export class FetchFailure extends Error {
  override name = 'FetchFailure';
  constructor(
    readonly kind: FetchFailureKind,
    message: string,
  ) {
    super(message);
  }
}

export interface FetchOptions {
  source: Extract<ModelSource, { kind: 's3' | 'https' }>;
  dest: string;
  env: NodeJS.ProcessEnv;
  log: (line: Record<string, unknown>) => void;
  /** How often progress is logged. */
  progressEveryMs?: number;
  lockStaleMs?: number;
}

export interface FetchResult {
  /** Bytes this attempt received from the store: 0 when the node had the artifact. */
  fetched: number;
  /** Bytes an earlier attempt had left, resumed from. */
  resumed: number;
  size: number;
}

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );
const sizeOf = (p: string) =>
  stat(p).then(
    (s) => s.size,
    () => 0,
  );

/** The URI as messages show it: a query (a presigned URL's signature) left out. */
export const shown = (uri: string) => uri.replace(/\?.*$/, '?…');

/** Where the fetcher keeps its own files for `dest`. */
function workFiles(dest: string) {
  const work = path.join(path.dirname(dest), '.fetch');
  const base = path.join(work, path.basename(dest));
  return { work, part: `${base}.part`, etag: `${base}.etag`, lock: `${base}.lock` };
}

export async function fetchArtifact(o: FetchOptions): Promise<FetchResult> {
  const files = workFiles(o.dest);
  await mkdir(files.work, { recursive: true });
  const done = () => exists(o.dest);
  const lock = await takeLock(files.lock, { staleMs: o.lockStaleMs ?? 20_000, done, log: o.log });
  if (!lock) {
    o.log({ msg: 'the artifact is in the node cache', fetched: 0 });
    return { fetched: 0, resumed: 0, size: await sizeOf(o.dest) };
  }
  try {
    if (await done()) {
      o.log({ msg: 'the artifact is in the node cache', fetched: 0 });
      return { fetched: 0, resumed: 0, size: await sizeOf(o.dest) };
    }
    return await fetchLocked(o, files, lock);
  } finally {
    await lock.release();
  }
}

/** A Content-Range header read: "bytes 100-199/200" gives start and total, "bytes '*'/200" the total alone. */
function contentRange(header: unknown): { start?: number; total?: number } {
  const m = /^bytes (?:(\d+)-\d+|\*)\/(\d+|\*)$/.exec(typeof header === 'string' ? header.trim() : '');
  if (!m) return {};
  return { start: m[1] === undefined ? undefined : Number(m[1]), total: m[2] === '*' ? undefined : Number(m[2]) };
}

async function startOver(files: ReturnType<typeof workFiles>): Promise<void> {
  await rm(files.part, { force: true });
  await rm(files.etag, { force: true });
}

async function fetchLocked(
  { source, dest, env, log, progressEveryMs = 2_000 }: FetchOptions,
  files: ReturnType<typeof workFiles>,
  lock: CacheLock,
): Promise<FetchResult> {
  const uri = shown(source.uri);
  const etag = await readFile(files.etag, 'utf8').catch(() => '');
  // A part is resumed only with the ETag of the object it came from: without one it cannot be checked.
  if (!etag) await startOver(files);
  let offset = await sizeOf(files.part);
  const req = storeRequest(source, offset, env);
  if (offset > 0) req.headers['If-Range'] = etag;
  const res = await request(req.url, {
    method: 'GET',
    headers: req.headers,
    headersTimeout: 30_000,
    bodyTimeout: 60_000,
  }).catch((err: unknown) => {
    throw new FetchFailure('retrying', `${uri}: cannot reach the store: ${(err as Error).message}`);
  });
  const range = contentRange(res.headers['content-range']);
  if (res.statusCode === 416 && offset > 0) {
    await res.body.dump();
    // Whole already (an attempt stopped after the last byte), if the store says the object is that long.
    if (range.total === offset) return finish({ source, dest, files, lock, fetched: 0, resumed: offset, log });
    await startOver(files);
    throw new FetchFailure(
      'retrying',
      `${uri}: the part an earlier attempt left does not fit the object; starting over`,
    );
  }
  if (res.statusCode !== 200 && res.statusCode !== 206) {
    const body = await res.body.text().catch(() => '');
    throw new FetchFailure(fetchFailureKind(res.statusCode), `${uri}: ${storeMessage(res.statusCode, body)}`);
  }
  const newEtag = typeof res.headers.etag === 'string' ? res.headers.etag : '';
  if (res.statusCode === 206 && (range.start !== offset || newEtag !== etag)) {
    await res.body.dump();
    await startOver(files);
    throw new FetchFailure('retrying', `${uri}: the store resumed at another place or object; starting over`);
  }
  if (res.statusCode === 200 && offset > 0) {
    log({ msg: 'the store sent the whole artifact (it changed, or ignores ranges): starting over', dropped: offset });
    offset = 0;
  }
  if (newEtag) await writeFile(files.etag, newEtag);
  else await rm(files.etag, { force: true });
  const length = Number(res.headers['content-length'] ?? NaN);
  const total = Number.isFinite(length) ? offset + length : undefined;
  const resumed = offset;
  let received = 0;
  const started = Date.now();
  let lastLog = 0;
  const progress = (force = false) => {
    const now = Date.now();
    if (!force && now - lastLog < progressEveryMs) return;
    lastLog = now;
    const seconds = Math.max((now - started) / 1000, 0.001);
    log({ msg: 'fetching', bytes: resumed + received, total, rate: Math.round(received / seconds), resumed });
  };
  if (resumed > 0) log({ msg: 'resuming a part an earlier attempt left', resumed, total });
  const count = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      received += chunk.length;
      progress();
      callback(null, chunk);
    },
  });
  try {
    await pipeline(res.body, count, createWriteStream(files.part, { flags: offset > 0 ? 'a' : 'w' }));
  } catch (err) {
    throw new FetchFailure(
      'retrying',
      `${uri}: the download broke off after ${resumed + received} bytes: ${(err as Error).message}`,
    );
  }
  progress(true);
  if (total !== undefined && resumed + received !== total)
    throw new FetchFailure('retrying', `${uri}: the store sent ${resumed + received} of ${total} bytes`);
  return finish({ source, dest, files, lock, fetched: received, resumed, log });
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

async function finish(f: {
  source: FetchOptions['source'];
  dest: string;
  files: ReturnType<typeof workFiles>;
  lock: CacheLock;
  fetched: number;
  resumed: number;
  log: FetchOptions['log'];
}): Promise<FetchResult> {
  const uri = shown(f.source.uri);
  const size = await sizeOf(f.files.part);
  if (size !== f.resumed + f.fetched) {
    // Another writer was here (a holder that lost its lock): nothing of this part can be trusted.
    await startOver(f.files);
    throw new FetchFailure(
      'retrying',
      `${uri}: the part holds ${size} bytes, not ${f.resumed + f.fetched}; starting over`,
    );
  }
  const handle = await open(f.files.part, 'r+');
  await handle.sync().finally(() => handle.close());
  // The sum of the bytes on disk, as the model will read them.
  const sum = await sha256Of(f.files.part);
  if (f.source.sha256 && sum !== f.source.sha256) {
    await startOver(f.files);
    throw new FetchFailure(
      'unavailable',
      `${uri}: checksum mismatch: spec.sha256 is ${f.source.sha256}, the artifact's is ${sum}`,
    );
  }
  if (!(await f.lock.stillMine())) throw new FetchFailure('retrying', `${uri}: another fetcher took the lock over`);
  await rename(f.files.part, f.dest);
  await rm(f.files.etag, { force: true });
  f.log({ msg: 'fetched and verified', fetched: f.fetched, resumed: f.resumed, size, sha256: sum });
  return { fetched: f.fetched, resumed: f.resumed, size };
}
