// The request for an artifact's bytes from its store: https as it is, s3 signed with AWS Signature V4
// (any S3-compatible store: path-style addressing on the Secret's endpoint). Credentials come from the
// Pod's Secret, which the kubelet hands the plugin for one publish, and go nowhere but into the signature.
import aws4 from 'aws4';
import type { ModelSource } from '../core/model-source.js';

export interface StoreRequest {
  url: URL;
  headers: Record<string, string>;
}

type Fetched = Extract<ModelSource, { kind: 's3' | 'https' }>;

/** The S3 endpoint: the Secret's AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS's own for the region. */
function s3Endpoint(env: StoreEnv, region: string): URL {
  const given = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL;
  return new URL(given || `https://s3.${region}.amazonaws.com`);
}

/** The store's credentials and endpoint: the Secret's keys, under the names AWS tools read. */
export type StoreEnv = Partial<Record<(typeof storeKeys)[number], string>>;

/** The keys read from a Secret; any other key is ignored. */
export const storeKeys = [
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_ENDPOINT_URL',
  'AWS_ENDPOINT_URL_S3',
  'AWS_REGION',
  'AWS_DEFAULT_REGION',
] as const;

/**
 * Who the object is, as the store names it: the endpoint, bucket and key (or the https URL). Two
 * tenants that name one object share its entry; a tenant that points its Secret at a store of its own
 * names another object, whatever it answers.
 */
export function objectIdentity(source: Fetched, env: StoreEnv): string {
  if (source.kind === 'https') return JSON.stringify(['https', source.uri]);
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1';
  return JSON.stringify(['s3', s3Endpoint(env, region).origin, source.bucket, source.key]);
}

/**
 * The GET of the artifact from `offset` on (a Range request), signed when the store needs it; with
 * `end`, up to that byte only (the one-byte read that asks the store whether it serves the object).
 */
export function storeRequest(source: Fetched, offset: number, env: StoreEnv, end?: number): StoreRequest {
  const range: Record<string, string> =
    end !== undefined ? { Range: `bytes=${offset}-${end}` } : offset > 0 ? { Range: `bytes=${offset}-` } : {};
  if (source.kind === 'https') return { url: new URL(source.uri), headers: range };
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || 'us-east-1';
  const endpoint = s3Endpoint(env, region);
  const base = endpoint.pathname.replace(/\/$/, '');
  const key = source.key.split('/').map(encodeURIComponent).join('/');
  const url = new URL(`${endpoint.origin}${base}/${encodeURIComponent(source.bucket)}/${key}`);
  const headers: Record<string, string> = { ...range };
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  // Without keys, an anonymous request: a public bucket needs none.
  if (!accessKeyId || !secretAccessKey) return { url, headers };
  const signed = aws4.sign(
    { host: url.host, path: `${url.pathname}${url.search}`, method: 'GET', service: 's3', region, headers },
    { accessKeyId, secretAccessKey, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) },
  );
  return { url, headers: signed.headers as Record<string, string> };
}

/** The store's own words for a refusal: S3's <Code> and <Message>, or the start of a plain body. */
export function storeMessage(status: number, body: string): string {
  const code = /<Code>([^<]*)<\/Code>/.exec(body)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(body)?.[1];
  if (code || message) return `${status} ${[code, message].filter(Boolean).join(': ')}`;
  const text = body.replace(/\s+/g, ' ').trim().slice(0, 200);
  return text ? `${status} ${text}` : `${status}`;
}
