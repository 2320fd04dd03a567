// Fetches an artifact into a part file of the node's cache, resuming what an earlier attempt left: the
// bytes continue from the part's size with a Range request, but only while the store still has the
// object they came from (If-Range with its ETag). Every byte past what the cache granted is asked for
// first (`admit`), so a store that streams without end fills nothing. Once whole, the part's size is
// checked, it is flushed to disk and its bytes are hashed: the caller names the part by that sum
// and holds each Pod's spec to it (node-cache.ts), so bytes whose sum differs are never served.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { request, type Dispatcher } from 'undici';
import { fetchFailureKind, type ModelSource } from '../core/model-source.js';
import type { Refusal } from '../core/model-cache.js';
import { boundedText, storeAgent, storeMessage, storeRequest, type StoreEnv } from './store-request.js';

/** unavailable: a person must act; retrying: passes by itself; refused: the cache or the quota cannot take it. */
export type FailureKind = 'unavailable' | 'retrying' | Refusal['reason'];

export class FetchFailure extends Error {
  override name = 'FetchFailure';
  constructor(
    readonly kind: FailureKind,
    message: string,
    /** The store's HTTP status, when it answered with a refusal. */
    readonly httpStatus?: number,
  ) {
    super(message);
  }
}

export interface FetchOptions {
  source: Extract<ModelSource, { kind: 's3' | 'https' }>;
  /** The part file the bytes arrive in; `<part>.etag` keeps the object's ETag for a resume. */
  part: string;
  env: StoreEnv;
  /** Asked before the part grows to `bytes` (the whole size when the store said it): a refusal stops the fetch. */
  admit: (bytes: number) => Refusal | undefined;
  /** How far it has come, as often as `progressEveryMs`. */
  progress: (p: FetchProgress) => void;
  progressEveryMs?: number;
  /** How many bytes the cache is asked for at a time when the size is unknown. */
  admitStep?: number;
  /** The size the store said when asked (-1: it did not): asked for before a byte is requested. */
  expectedSize?: number;
}

/** How far a fetch has come: bytes in the part, the whole size when the store said it, bytes a second. */
export interface FetchProgress {
  bytes: number;
  total?: number;
  rate: number;
  /** Bytes an earlier attempt had left, resumed from. */
  resumed: number;
}

export interface FetchResult {
  /** Bytes this attempt received from the store. */
  fetched: number;
  /** Bytes an earlier attempt had left, resumed from. */
  resumed: number;
  size: number;
  sha256: string;
  /** The object's ETag as the store sent it ('' when none). */
  etag: string;
}

const sizeOf = (p: string) =>
  stat(p).then(
    (s) => s.size,
    () => 0,
  );

/** The URI as messages show it: a query (a presigned URL's signature) left out. */
export const shown = (uri: string) => uri.replace(/\?.*$/, '?…');

/** A Content-Range header read: "bytes 100-199/200" gives start and total, "bytes '*'/200" the total alone. */
function contentRange(header: unknown): { start?: number; total?: number } {
  const m = /^bytes (?:(\d+)-\d+|\*)\/(\d+|\*)$/.exec(typeof header === 'string' ? header.trim() : '');
  if (!m) return {};
  return { start: m[1] === undefined ? undefined : Number(m[1]), total: m[2] === '*' ? undefined : Number(m[2]) };
}

interface PartFiles {
  part: string;
  etag: string;
}

async function startOver(files: PartFiles): Promise<void> {
  await rm(files.part, { force: true });
  await rm(files.etag, { force: true });
}

/** Fetches the artifact into its part, verified: the caller owns the part (one fetch per object at a time). */
export async function fetchArtifact(o: FetchOptions): Promise<FetchResult> {
  const files = { part: o.part, etag: `${o.part}.etag` };
  const uri = shown(o.source.uri);
  // Refused before the request when the store said the size: not a byte of it crosses the network.
  const early = o.expectedSize !== undefined && o.expectedSize >= 0 ? o.admit(o.expectedSize) : undefined;
  if (early) throw new FetchFailure(early.reason, `${uri}: ${early.message}`);
  const etag = await readFile(files.etag, 'utf8').catch(() => '');
  // A part is resumed only with the ETag of the object it came from: without one it cannot be checked.
  if (!etag) await startOver(files);
  const answer = await ask(o, files, await sizeOf(files.part), etag);
  if ('whole' in answer) return finish({ source: o.source, files, fetched: 0, resumed: answer.whole, etag });
  const { res, start } = answer;
  const newEtag = typeof res.headers.etag === 'string' ? res.headers.etag : '';
  if (newEtag) await writeFile(files.etag, newEtag);
  else await rm(files.etag, { force: true });
  const length = Number(res.headers['content-length'] ?? NaN);
  const total = Number.isFinite(length) ? start + length : undefined;
  const refusal = o.admit(total ?? start + (o.admitStep ?? defaultAdmitStep));
  if (refusal) {
    res.body.destroy();
    await startOver(files);
    throw new FetchFailure(refusal.reason, `${uri}: ${refusal.message}`);
  }
  const received = await streamIntoPart(o, res, files, start, total);
  if (total !== undefined && start + received !== total)
    throw new FetchFailure('retrying', `${uri}: the store sent ${start + received} of ${total} bytes`);
  return finish({ source: o.source, files, fetched: received, resumed: start, etag: newEtag });
}

const defaultAdmitStep = 16 * 2 ** 20;

type Answer = { res: Dispatcher.ResponseData; start: number } | { whole: number };

/**
 * The store's answer to the GET from `offset` on: the bytes to append from `start` (0 when the store
 * sent the whole object again), or the part is whole already. Anything else is a FetchFailure.
 */
async function ask(o: FetchOptions, files: PartFiles, offset: number, etag: string): Promise<Answer> {
  const uri = shown(o.source.uri);
  const req = storeRequest(o.source, offset, o.env);
  if (offset > 0) req.headers['If-Range'] = etag;
  const res = await request(req.url, {
    method: 'GET',
    dispatcher: storeAgent,
    headers: req.headers,
    headersTimeout: 30_000,
    bodyTimeout: 60_000,
  }).catch((err: unknown) => {
    throw new FetchFailure('retrying', `${uri}: cannot reach the store: ${(err as Error).message}`);
  });
  const range = contentRange(res.headers['content-range']);
  if (res.statusCode === 416 && offset > 0) {
    res.body.destroy();
    // Whole already (an attempt stopped after the last byte), if the store says the object is that long.
    if (range.total === offset) return { whole: offset };
    await startOver(files);
    throw new FetchFailure(
      'retrying',
      `${uri}: the part an earlier attempt left does not fit the object; starting over`,
    );
  }
  if (res.statusCode !== 200 && res.statusCode !== 206) {
    const body = await boundedText(res.body, 16 * 1024);
    throw new FetchFailure(
      fetchFailureKind(res.statusCode),
      `${uri}: ${storeMessage(res.statusCode, body)}`,
      res.statusCode,
    );
  }
  const newEtag = typeof res.headers.etag === 'string' ? res.headers.etag : '';
  if (res.statusCode === 206 && (range.start !== offset || newEtag !== etag)) {
    res.body.destroy();
    await startOver(files);
    throw new FetchFailure('retrying', `${uri}: the store resumed at another place or object; starting over`);
  }
  // A 200 is the whole artifact (it changed, or the store ignores ranges): it starts over.
  return { res, start: res.statusCode === 200 ? 0 : offset };
}

/**
 * Appends the answer's bytes to the part from `start`, asking the cache for every byte past what it
 * granted: a store that streams without end, or sends more than it announced, is stopped there.
 * Returns the bytes received.
 */
async function streamIntoPart(
  o: FetchOptions,
  res: Dispatcher.ResponseData,
  files: PartFiles,
  start: number,
  total: number | undefined,
): Promise<number> {
  const uri = shown(o.source.uri);
  const step = o.admitStep ?? defaultAdmitStep;
  let granted = total ?? start + step;
  let received = 0;
  const began = Date.now();
  let lastReport = 0;
  const progress = (force = false) => {
    const now = Date.now();
    if (!force && now - lastReport < (o.progressEveryMs ?? 2_000)) return;
    lastReport = now;
    const rate = Math.round(received / Math.max((now - began) / 1000, 0.001));
    o.progress({ bytes: start + received, total, rate, resumed: start });
  };
  const count = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      received += chunk.length;
      if (start + received > granted) {
        granted = Math.max(start + received, granted + step);
        const more =
          total === undefined
            ? o.admit(granted)
            : { reason: 'unavailable' as const, message: `the store sent more than the ${total} bytes it announced` };
        if (more) return callback(new FetchFailure(more.reason, more.message));
      }
      progress();
      callback(null, chunk);
    },
  });
  try {
    await pipeline(res.body, count, createWriteStream(files.part, { flags: start > 0 ? 'a' : 'w' }));
  } catch (err) {
    if (err instanceof FetchFailure) {
      await startOver(files);
      throw new FetchFailure(err.kind, `${uri}: ${err.message}`);
    }
    throw new FetchFailure(
      'retrying',
      `${uri}: the download broke off after ${start + received} bytes: ${(err as Error).message}`,
    );
  }
  progress(true);
  return received;
}

async function sha256Of(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

async function finish(f: {
  source: FetchOptions['source'];
  files: PartFiles;
  fetched: number;
  resumed: number;
  etag: string;
}): Promise<FetchResult> {
  const uri = shown(f.source.uri);
  const size = await sizeOf(f.files.part);
  if (size !== f.resumed + f.fetched) {
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
  await rm(f.files.etag, { force: true });
  return { fetched: f.fetched, resumed: f.resumed, size, sha256: sum, etag: f.etag };
}
