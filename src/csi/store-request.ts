// The request for an artifact's bytes from its store: https as it is, s3 signed with AWS Signature V4
// (any S3-compatible store: path-style addressing on the Secret's endpoint). Credentials come from the
// Pod's Secret, which the kubelet hands the plugin for one publish, and go nowhere but into the signature.
import dns from 'node:dns';
import net from 'node:net';
import aws4 from 'aws4';
import { Agent, type Dispatcher } from 'undici';
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
  // The very URL the bytes come from: an endpoint with a path of its own names another object.
  const { url } = storeRequest(source, 0, env);
  return JSON.stringify([source.kind, `${url.origin}${url.pathname}${url.search}`]);
}

/**
 * Why a Secret's endpoint or region cannot be used, or undefined: an endpoint is an http(s) URL
 * without credentials, query or fragment; a region is a plain name (it is part of AWS's host name).
 */
export function storeEnvProblem(env: StoreEnv): string | undefined {
  for (const key of ['AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_S3'] as const) {
    const given = env[key];
    if (!given) continue;
    let url: URL;
    try {
      url = new URL(given);
    } catch {
      return `its ${key} is not a URL`;
    }
    if (!['http:', 'https:'].includes(url.protocol) || url.username || url.password || url.search || url.hash)
      return `its ${key} must be an http:// or https:// URL without credentials, query or fragment`;
  }
  for (const key of ['AWS_REGION', 'AWS_DEFAULT_REGION'] as const)
    if (env[key] && !/^[a-z0-9-]{1,32}$/.test(env[key])) return `its ${key} is not a region name`;
  return undefined;
}

/** Link-local addresses: the cloud's instance metadata (and its credentials) answer there, never a store. */
const linkLocalAddresses = new net.BlockList();
linkLocalAddresses.addSubnet('169.254.0.0', 16, 'ipv4');
linkLocalAddresses.addSubnet('fe80::', 10, 'ipv6');
linkLocalAddresses.addAddress('fd00:ec2::254', 'ipv6');
// The IPv4 ones written as IPv6 (BlockList maps ::ffff:a.b.c.d itself): IPv4-compatible and NAT64.
linkLocalAddresses.addSubnet('::a9fe:0', 112, 'ipv6');
linkLocalAddresses.addSubnet('64:ff9b::a9fe:0', 112, 'ipv6');

function linkLocal(address: string): boolean {
  return linkLocalAddresses.check(address, net.isIPv4(address) ? 'ipv4' : 'ipv6');
}

/** Refuses a store at a link-local address, named or resolved: a tenant's Secret must not reach the node's metadata. */
export function refusedAddress(url: URL): string | undefined {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return net.isIP(host) && linkLocal(host) ? `${url.host} is a link-local address` : undefined;
}

type Addresses = dns.LookupAddress[];

/**
 * A store's addresses, remembered: fresh for a minute (every mount asks its store, and a node's DNS
 * under load has taken 5–10 s to answer here), and used for 10 minutes more when the resolver fails.
 */
const resolved = new Map<string, { at: number; addresses: Addresses }>();
const freshMs = 60_000;
const staleMs = 600_000;

function lookupStore(hostname: string, callback: (err: Error | null, addresses?: Addresses) => void): void {
  const known = resolved.get(hostname);
  if (known && Date.now() - known.at < freshMs) return callback(null, known.addresses);
  dns.lookup(hostname, { all: true }, (err, addresses) => {
    if (err) return known && Date.now() - known.at < staleMs ? callback(null, known.addresses) : callback(err);
    const allowed = addresses.filter((a) => !linkLocal(a.address));
    if (allowed.length === 0) return callback(new Error(`${hostname} resolves to a link-local address`));
    if (resolved.size >= 1024) resolved.delete(resolved.keys().next().value!);
    resolved.set(hostname, { at: Date.now(), addresses: allowed });
    return callback(null, allowed);
  });
}

/** The stores' connections: a name that resolves to a link-local address is refused too. */
export const storeAgent: Dispatcher = new Agent({
  connect: {
    lookup: ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) =>
      lookupStore(hostname, (err, addresses) => {
        if (err || !addresses) return callback(err);
        return options.all ? callback(null, addresses) : callback(null, addresses[0]!.address, addresses[0]!.family);
      })) as unknown as net.LookupFunction,
  },
});

/** Up to `limit` bytes of an answer's body as text; the rest is never read (the connection is closed). */
export async function boundedText(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      if (size >= limit) break;
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
  } catch {
    // A body that broke off says what it said so far.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
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
