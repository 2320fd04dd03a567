// The local stack's object store (issue 40): SeaweedFS serving S3 on loopback, with a bucket holding
// the reference model server's digits model, so a MachineModel can name it by storageUri. Requests
// need the stack's keys (anonymous ones are refused), which live in the state folder, never printed.
// Pods on the real node reach it as the Service object-store.object-store (a forwarder on the node's
// IP stands in, as for the apiserver).
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import aws4 from 'aws4';
import { request } from 'undici';
import { objectStore } from './components.js';
import { ensureInstalled } from './install.js';
import { freePort, startProcess, waitUntil, type ManagedProcess } from './processes.js';

export const objectStoreNamespace = 'object-store';
export const modelsBucket = 'models';
/** The digits model's key in the bucket, and where the model server's image holds it. */
export const sampleModelKey = 'digits/v1/digits.joblib';
export const sampleModelInImage = '/models/digits.joblib';

export interface ObjectStoreInfo {
  /** S3 on loopback, for this machine. */
  endpoint: string;
  /** S3 as the cluster's Pods reach it, when a real node runs. */
  podEndpoint?: string;
  region: string;
  bucket: string;
  /** The stack's keys, in a file of mode 0600. */
  credentialsFile: string;
  /** The reference model in the bucket. */
  sampleModel?: { uri: string; sha256: string; size: number };
}

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export function readCredentials(info: ObjectStoreInfo): Credentials {
  return JSON.parse(readFileSync(info.credentialsFile, 'utf8')) as Credentials;
}

/** The stack's keys: made once per state folder. */
function ensureCredentials(dir: string): string {
  const file = path.join(dir, 'credentials.json');
  if (!existsSync(file)) {
    const keys: Credentials = {
      accessKeyId: `MMO${randomBytes(8).toString('hex').toUpperCase()}`,
      secretAccessKey: randomBytes(24).toString('base64url'),
    };
    writeFileSync(file, JSON.stringify(keys), { mode: 0o600 });
  }
  return file;
}

export interface StartObjectStoreOptions {
  stateDir: string;
  logFile: string;
  log: (line: string) => void;
}

/** Starts SeaweedFS (master, volume, filer and S3 in one process) on free loopback ports and makes the bucket. */
export async function startObjectStore(
  o: StartObjectStoreOptions,
  started: (p: ManagedProcess) => ManagedProcess,
): Promise<ObjectStoreInfo> {
  const bin = await ensureInstalled(objectStore, o.log);
  const dir = path.join(o.stateDir, 'object-store');
  mkdirSync(path.join(dir, 'data'), { recursive: true });
  const credentialsFile = ensureCredentials(dir);
  const keys = JSON.parse(readFileSync(credentialsFile, 'utf8')) as Credentials;
  const s3Config = path.join(dir, 's3.json');
  writeFileSync(
    s3Config,
    JSON.stringify({
      identities: [
        {
          name: 'stack',
          credentials: [{ accessKey: keys.accessKeyId, secretKey: keys.secretAccessKey }],
          actions: ['Admin', 'Read', 'Write', 'List', 'Tagging'],
        },
      ],
    }),
    { mode: 0o600 },
  );
  const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc] = await Promise.all(
    Array.from({ length: 8 }, () => freePort()),
  );
  const p = started(
    startProcess(
      'object-store',
      bin,
      [
        'server',
        '-ip=127.0.0.1',
        '-ip.bind=127.0.0.1',
        `-dir=${path.join(dir, 'data')}`,
        `-master.port=${master}`,
        `-master.port.grpc=${masterGrpc}`,
        '-master.volumeSizeLimitMB=1024',
        `-volume.port=${volume}`,
        `-volume.port.grpc=${volumeGrpc}`,
        '-filer',
        `-filer.port=${filer}`,
        `-filer.port.grpc=${filerGrpc}`,
        '-s3',
        `-s3.port=${s3}`,
        `-s3.port.grpc=${s3Grpc}`,
        `-s3.config=${s3Config}`,
        // Its Iceberg and Lance servers would listen on fixed ports, which two stacks on a machine share.
        '-s3.port.iceberg=0',
        '-s3.port.lance=0',
      ],
      o.logFile,
    ),
  );
  const info: ObjectStoreInfo = {
    endpoint: `http://127.0.0.1:${s3}`,
    region: 'us-east-1',
    bucket: modelsBucket,
    credentialsFile,
  };
  // The bucket made is the sign that every part serves: S3 answers only once the filer does.
  await waitUntil(p, 'serving S3', async () => [200, 409].includes((await s3Request(info, 'PUT', '')).status), 90_000);
  return info;
}

export interface S3Answer {
  status: number;
  body: string;
}

/** A signed request to the stack's store: `key` within the bucket ('' is the bucket itself). */
export async function s3Request(
  info: ObjectStoreInfo,
  method: 'GET' | 'PUT' | 'DELETE' | 'HEAD',
  key: string,
  body?: Buffer,
  credentials: Credentials | null = readCredentials(info),
): Promise<S3Answer> {
  const url = new URL(
    `${info.endpoint}/${info.bucket}${key ? `/${key.split('/').map(encodeURIComponent).join('/')}` : ''}`,
  );
  const base: Record<string, string> = { 'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD' };
  const headers = credentials
    ? (aws4.sign(
        { host: url.host, path: url.pathname, method, service: 's3', region: info.region, headers: base },
        credentials,
      ).headers as Record<string, string>)
    : {};
  try {
    const res = await request(url, { method, headers, body, headersTimeout: 30_000 });
    return { status: res.statusCode, body: await res.body.text() };
  } catch (err) {
    return { status: 0, body: (err as Error).message };
  }
}

/** Puts an object into the bucket; its s3:// URI and sha256. */
export async function putObject(
  info: ObjectStoreInfo,
  key: string,
  body: Buffer,
): Promise<{ uri: string; sha256: string }> {
  const res = await s3Request(info, 'PUT', key, body);
  if (res.status !== 200) throw new Error(`putting s3://${info.bucket}/${key} failed: ${res.status} ${res.body}`);
  return { uri: `s3://${info.bucket}/${key}`, sha256: createHash('sha256').update(body).digest('hex') };
}

/** A Secret a MachineModel's storageSecret can name: the store as the Pods reach it, and the stack's keys. */
export function storeSecret(
  info: ObjectStoreInfo,
  namespace: string,
  name: string,
  credentials = readCredentials(info),
) {
  if (!info.podEndpoint) throw new Error('the object store is reachable from Pods only with a real node');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace },
    type: 'Opaque',
    stringData: {
      AWS_ENDPOINT_URL: info.podEndpoint,
      AWS_REGION: info.region,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    },
  };
}

export interface PodAccess {
  nodeIp: string;
  /** Server-side apply of objects, as the admin. */
  apply: (objects: object[]) => void;
  logFile: string;
}

/**
 * Lets the real node's Pods reach the store: a forwarder on the node's IP (the store listens on
 * loopback only) behind the Service object-store.object-store, port 80.
 */
export function exposeToPods(
  info: ObjectStoreInfo,
  access: PodAccess,
  started: (p: ManagedProcess) => ManagedProcess,
): void {
  const port = new URL(info.endpoint).port;
  started(
    startProcess(
      'object-store-forwarder',
      'socat',
      [`TCP-LISTEN:${port},bind=${access.nodeIp},fork,reuseaddr`, `TCP:127.0.0.1:${port}`],
      access.logFile,
    ),
  );
  const labels = { 'app.kubernetes.io/name': 'object-store', 'app.kubernetes.io/part-of': 'local-stack' };
  access.apply([
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: objectStoreNamespace, labels } },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'object-store', namespace: objectStoreNamespace, labels },
      spec: { ports: [{ name: 'http', port: 80, targetPort: Number(port), protocol: 'TCP' }] },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'object-store',
        namespace: objectStoreNamespace,
        labels: {
          ...labels,
          'kubernetes.io/service-name': 'object-store',
          'endpointslice.kubernetes.io/managed-by': 'local-stack',
        },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [access.nodeIp], conditions: { ready: true } }],
      ports: [{ name: 'http', port: Number(port), protocol: 'TCP' }],
    },
  ]);
  info.podEndpoint = `http://object-store.${objectStoreNamespace}.svc.cluster.local`;
}

/** Puts the reference model server's digits model (from its image) into the bucket. */
export async function seedSampleModel(info: ObjectStoreInfo, modelFile: string): Promise<void> {
  const { uri, sha256 } = await putObject(info, sampleModelKey, readFileSync(modelFile));
  info.sampleModel = { uri, sha256, size: readFileSync(modelFile).length };
}
