// The question every mount asks first: does the store, asked with the Pod's own Secret, serve the
// object, and as what (its ETag and size)? A one-byte ranged GET, bounded in bytes and in time.
import { request } from 'undici';
import { fetchFailureKind, type ModelSource } from '../core/model-source.js';
import { FetchFailure, shown } from './download.js';
import { boundedText, refusedAddress, storeAgent, storeMessage, storeRequest, type StoreEnv } from './store-request.js';

type Fetched = Extract<ModelSource, { kind: 's3' | 'https' }>;

/** What the store says of an object to the Pod's credentials: it serves it, this long, with this ETag. */
export interface ObjectSeen {
  etag: string;
  size: number;
}

/**
 * Asks the store, with the Pod's own credentials, whether it serves the object: a one-byte read,
 * whose answer carries its ETag and size. A refusal is the store's own words.
 */
export async function askStore(source: Fetched, env: StoreEnv): Promise<ObjectSeen> {
  const req = storeRequest(source, 0, env, 0);
  const refused = refusedAddress(req.url);
  if (refused) throw new FetchFailure('unavailable', `${shown(source.uri)}: the store is not asked: ${refused}`);
  const res = await request(req.url, {
    method: 'GET',
    dispatcher: storeAgent,
    headers: req.headers,
    headersTimeout: 15_000,
    bodyTimeout: 15_000,
    // The whole question, however slowly a store answers it.
    signal: AbortSignal.timeout(30_000),
  }).catch((err: unknown) => {
    throw new FetchFailure('retrying', `${shown(source.uri)}: cannot reach the store: ${(err as Error).message}`);
  });
  const etag = typeof res.headers.etag === 'string' ? res.headers.etag : '';
  const total = /\/(\d+)$/.exec(String(res.headers['content-range'] ?? ''))?.[1];
  const ok = res.statusCode === 206 || res.statusCode === 200 || (res.statusCode === 416 && total === '0');
  // The store's answer is the tenant's to choose: a few KiB of it at most (a refusal's words), never
  // a body a store that ignores the Range streams without end.
  const body = await boundedText(res.body, ok ? 0 : 16 * 1024);
  // A size the store does not say is -1: such an object is never found again, only fetched.
  const size = (n: unknown) => (Number.isSafeInteger(Number(n)) && Number(n) >= 0 ? Number(n) : -1);
  if (res.statusCode === 206 || (res.statusCode === 416 && total === '0')) return { etag, size: size(total) };
  if (res.statusCode === 200) return { etag, size: size(res.headers['content-length']) };
  throw new FetchFailure(
    fetchFailureKind(res.statusCode),
    `${shown(source.uri)}: ${storeMessage(res.statusCode, body)}`,
    res.statusCode,
  );
}
