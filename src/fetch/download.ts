// Fetches an artifact into the node's cache, resuming what an earlier attempt left: the bytes arrive
// in "<dest>.part" (kept across a killed Pod), continue from its size with a Range request, and are
// hashed as they come. Only an artifact whose sum matches is renamed to <dest>, which is what the
// model reads; a mismatch deletes the part, so the bytes are never served.
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { request } from 'undici';
import { fetchFailureKind, type FetchFailureKind, type ModelSource } from '../core/model-source.js';
import { takeLock } from './cache-lock.js';
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
  /** How often progress is logged (the operator reads the last line). */
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

/** Hashes what the part already holds, so the sum covers the whole artifact after a resume. */
async function hashPart(part: string, hash: Hash): Promise<number> {
  const size = await stat(part).then(
    (s) => s.size,
    () => 0,
  );
  if (size > 0) for await (const chunk of createReadStream(part)) hash.update(chunk as Buffer);
  return size;
}

export async function fetchArtifact(o: FetchOptions): Promise<FetchResult> {
  const { dest, source, log } = o;
  await mkdir(path.dirname(dest), { recursive: true });
  const done = () => exists(dest);
  const lock = await takeLock(`${dest}.lock`, { staleMs: o.lockStaleMs ?? 20_000, done, log });
  if (!lock) {
    log({ msg: 'the artifact is in the node cache', fetched: 0 });
    return { fetched: 0, resumed: 0, size: (await stat(dest)).size };
  }
  try {
    if (await done()) return { fetched: 0, resumed: 0, size: (await stat(dest)).size };
    return await fetchLocked(o);
  } finally {
    await lock.release();
  }
}

async function fetchLocked({ source, dest, env, log, progressEveryMs = 2_000 }: FetchOptions): Promise<FetchResult> {
  const part = `${dest}.part`;
  const etagFile = `${dest}.etag`;
  let hash = createHash('sha256');
  let offset = await hashPart(part, hash);
  const etag = await readFile(etagFile, 'utf8').catch(() => '');
  const req = storeRequest(source, offset, env);
  // The part is resumed only while the object is the one it came from: otherwise the store sends it whole.
  if (offset > 0 && etag) req.headers['If-Range'] = etag;
  const res = await request(req.url, {
    method: 'GET',
    headers: req.headers,
    headersTimeout: 30_000,
    bodyTimeout: 60_000,
  }).catch((err: unknown) => {
    throw new FetchFailure('retrying', `${source.uri}: cannot reach the store: ${(err as Error).message}`);
  });
  if (res.statusCode === 416 && offset > 0) {
    // The part is whole already: an earlier attempt was stopped after the last byte.
    await res.body.dump();
    return finish({ source, dest, part, etagFile, hash, fetched: 0, resumed: offset, log });
  }
  if (res.statusCode !== 200 && res.statusCode !== 206) {
    const body = await res.body.text().catch(() => '');
    throw new FetchFailure(fetchFailureKind(res.statusCode), `${source.uri}: ${storeMessage(res.statusCode, body)}`);
  }
  if (res.statusCode === 200 && offset > 0) {
    log({ msg: 'the store sent the whole artifact (it changed, or ignores ranges): starting over', dropped: offset });
    offset = 0;
    hash = createHash('sha256');
  }
  const length = Number(res.headers['content-length'] ?? NaN);
  const total = Number.isFinite(length) ? offset + length : undefined;
  const newEtag = res.headers.etag;
  if (typeof newEtag === 'string') await writeFile(etagFile, newEtag);
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
      hash.update(chunk);
      progress();
      callback(null, chunk);
    },
  });
  try {
    await pipeline(res.body, count, createWriteStream(part, { flags: offset > 0 ? 'a' : 'w' }));
  } catch (err) {
    throw new FetchFailure(
      'retrying',
      `${source.uri}: the download broke off after ${resumed + received} bytes: ${(err as Error).message}`,
    );
  }
  progress(true);
  if (total !== undefined && resumed + received !== total)
    throw new FetchFailure('retrying', `${source.uri}: the store sent ${resumed + received} of ${total} bytes`);
  return finish({ source, dest, part, etagFile, hash, fetched: received, resumed, log });
}

async function finish(f: {
  source: FetchOptions['source'];
  dest: string;
  part: string;
  etagFile: string;
  hash: Hash;
  fetched: number;
  resumed: number;
  log: FetchOptions['log'];
}): Promise<FetchResult> {
  const sum = f.hash.digest('hex');
  if (f.source.sha256 && sum !== f.source.sha256) {
    // Never served, and never resumed from: the next attempt fetches it whole.
    await rm(f.part, { force: true });
    await rm(f.etagFile, { force: true });
    throw new FetchFailure(
      'unavailable',
      `${f.source.uri}: checksum mismatch: spec.sha256 is ${f.source.sha256}, the artifact's is ${sum}`,
    );
  }
  await rename(f.part, f.dest);
  await rm(f.etagFile, { force: true });
  const size = (await stat(f.dest)).size;
  f.log({ msg: 'fetched and verified', fetched: f.fetched, resumed: f.resumed, size, sha256: sum });
  return { fetched: f.fetched, resumed: f.resumed, size };
}
