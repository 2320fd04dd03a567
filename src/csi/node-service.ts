// The CSI Identity and Node services of the model cache: ephemeral inline volumes only. A publish
// reads the volume's attributes (uri, sha256) and the Pod's namespace, asks the store with the Pod's
// own Secret whether it serves the object, finds or fetches the verified entry, and binds it
// read-only at the kubelet's target. Failures are gRPC codes whose message the kubelet puts in the
// Pod's FailedMount Event, where the operator reads it (src/core/mount-troubles.ts).
import type { ServerUnaryCall, sendUnaryData, UntypedServiceImplementation } from '@grpc/grpc-js';
import path from 'node:path';
import { status } from '@grpc/grpc-js';
import { parseQuota } from '../core/model-cache.js';
import { artifactName, isFetched, modelLocation, modelSource, storageUriProblem } from '../core/model-source.js';
import { FetchFailure, shown, type FailureKind } from './download.js';
import type { NodeCache } from './node-cache.js';
import { askStore } from './store-question.js';
import { storeEnvProblem, storeKeys, type StoreEnv } from './store-request.js';

export interface NodeServiceOptions {
  driver: string;
  /** The kubelet's root: every target it names is under its pods/ folder. */
  kubeletDir: string;
  version: string;
  nodeId: string;
  cache: NodeCache;
  /** The namespace's quota annotation, as text (undefined when it has none). */
  quotaOf: (namespace: string) => Promise<string | undefined>;
  /** How long a publish waits for a fetch before it answers with the progress (the kubelet asks again). */
  waitMs: number;
  log: (line: Record<string, unknown>) => void;
}

type Request = Record<string, unknown> & {
  volume_id?: string;
  target_path?: string;
  volume_context?: Record<string, string>;
  secrets?: Record<string, string>;
};

class Refused extends Error {
  constructor(
    readonly code: status,
    message: string,
  ) {
    super(message);
  }
}

const codes: Record<FailureKind, status> = {
  unavailable: status.FAILED_PRECONDITION,
  retrying: status.UNAVAILABLE,
  CacheFull: status.RESOURCE_EXHAUSTED,
  QuotaExceeded: status.RESOURCE_EXHAUSTED,
};

/** A store's refusal keeps its kind in the code: 403 and 401 PERMISSION_DENIED, 404 NOT_FOUND. */
function failureCode(f: FetchFailure): status {
  if (f.httpStatus === 401 || f.httpStatus === 403) return status.PERMISSION_DENIED;
  if (f.httpStatus === 404) return status.NOT_FOUND;
  return codes[f.kind];
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const volumeIdPattern = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;

/** The volume's attributes read, or why they cannot be used: fail closed on anything unexpected. */
function volumeRequest(req: Request, podsDir: string) {
  const ctx = req.volume_context ?? {};
  const namespace = ctx['csi.storage.k8s.io/pod.namespace'];
  if (!namespace) throw new Refused(status.INVALID_ARGUMENT, 'no Pod namespace: the CSIDriver must set podInfoOnMount');
  if (ctx['csi.storage.k8s.io/ephemeral'] !== 'true')
    throw new Refused(status.INVALID_ARGUMENT, 'only ephemeral inline volumes are served');
  const uri = ctx.uri ?? '';
  if (uri.length > 2048) throw new Refused(status.INVALID_ARGUMENT, 'the uri attribute is longer than 2048 characters');
  const sha = ctx.sha256 ?? '';
  if (sha && !/^[0-9a-f]{64}$/.test(sha))
    throw new Refused(status.INVALID_ARGUMENT, 'the sha256 attribute is not 64 lowercase hex digits');
  const source = modelSource(modelLocation({ storageUri: uri, sha256: sha || undefined }));
  const problem = storageUriProblem(uri);
  if (!isFetched(source) || problem)
    throw new Refused(
      status.INVALID_ARGUMENT,
      `the uri attribute ${shown(uri)} ${problem ?? 'is not s3:// or https://'}`,
    );
  if (!volumeIdPattern.test(req.volume_id ?? ''))
    throw new Refused(status.INVALID_ARGUMENT, 'a volume id it cannot use');
  return { source, namespace, volume: req.volume_id!, target: targetOf(req, podsDir) };
}

/** The kubelet's target: a normalized path under its pods/ folder, never anywhere else on the node. */
function targetOf(req: Request, podsDir: string): string {
  const target = path.resolve(req.target_path ?? '');
  if (!req.target_path || target !== req.target_path || !target.startsWith(podsDir))
    throw new Refused(status.INVALID_ARGUMENT, `a target path outside the kubelet's pods folder: ${req.target_path}`);
  return target;
}

/**
 * The Secret's store keys alone. One key without the other says which is missing; neither is an
 * anonymous request (a public bucket, at the Secret's endpoint if it names one).
 */
function storeEnv(secrets: Record<string, string> | undefined, uri: string): StoreEnv {
  const env: StoreEnv = {};
  for (const key of storeKeys) if (secrets?.[key]) env[key] = secrets[key];
  const pair = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'] as const;
  const missing = pair.find((key) => !env[key]);
  if (missing && pair.some((key) => env[key]))
    throw new Refused(status.FAILED_PRECONDITION, `${shown(uri)}: the storageSecret has no key ${missing}`);
  const problem = storeEnvProblem(env);
  if (problem) throw new Refused(status.FAILED_PRECONDITION, `${shown(uri)}: the storageSecret: ${problem}`);
  return env;
}

/** An administrator's quota that does not parse holds nothing rather than everything. */
async function quotaOf(o: NodeServiceOptions, namespace: string): Promise<number | undefined> {
  const q = parseQuota(await o.quotaOf(namespace));
  if (q.invalid)
    throw new Refused(status.RESOURCE_EXHAUSTED, `QuotaExceeded: namespace ${namespace}'s quota ${q.invalid}`);
  return q.bytes;
}

/** NodePublishVolume: asked at the store with the Pod's Secret, found or fetched, bound read-only. */
async function publish(o: NodeServiceOptions, req: Request, podsDir: string): Promise<object> {
  const started = Date.now();
  const v = volumeRequest(req, podsDir);
  if (await o.cache.published(v.volume, v.target)) return {};
  const env = storeEnv(req.secrets, v.source.uri);
  const seen = await askStore(v.source, env);
  const quota = await quotaOf(o, v.namespace);
  const key = await o.cache.entryFor({ source: v.source, env, seen, namespace: v.namespace, quota }, o.waitMs);
  if (!key) {
    const p = o.cache.progressOf(v.source, env);
    const done = p ? `: ${mib(p.bytes)}${p.total ? ` of ${mib(p.total)}` : ''}, ${mib(p.rate)}/s` : '';
    throw new Refused(status.ABORTED, `fetching ${shown(v.source.uri)} into the node's cache${done}`);
  }
  await o.cache.publish({ key, ...v, quota, name: artifactName(v.source) });
  const uri = shown(v.source.uri);
  o.log({ msg: 'published', volume: v.volume, namespace: v.namespace, uri, sha256: key, ms: Date.now() - started });
  return {};
}

/** How a failure is answered: its gRPC code, and a message for a person (the kubelet's FailedMount Event). */
function answerOf(err: unknown): { code: status; details: string } {
  const code = err instanceof Refused ? err.code : err instanceof FetchFailure ? failureCode(err) : status.INTERNAL;
  const details =
    err instanceof FetchFailure && codes[err.kind] === status.RESOURCE_EXHAUSTED
      ? `${err.kind}: ${err.message}`
      : (err as Error).message;
  return { code, details };
}

export function nodeService(o: NodeServiceOptions): {
  identity: UntypedServiceImplementation;
  node: UntypedServiceImplementation;
} {
  const podsDir = `${path.resolve(o.kubeletDir, 'pods')}/`;
  /** Publishes under way, by volume: the kubelet asks again after its timeout, and waits for the first. */
  const publishing = new Map<string, Promise<object>>();

  function publishOnce(req: Request): Promise<object> {
    const volume = req.volume_id ?? '';
    const running = publishing.get(volume);
    if (running) return running;
    const p = publish(o, req, podsDir).finally(() => publishing.delete(volume));
    publishing.set(volume, p);
    return p;
  }

  async function unpublish(req: Request): Promise<object> {
    if (!volumeIdPattern.test(req.volume_id ?? ''))
      throw new Refused(status.INVALID_ARGUMENT, 'a volume id it cannot use');
    // A publish still under way (the kubelet gave up waiting for it) finishes first, then is undone.
    await publishing.get(req.volume_id!)?.catch(() => undefined);
    await o.cache.unpublish(req.volume_id!, targetOf(req, podsDir));
    return {};
  }

  /** A handler whose failures are gRPC statuses with a message for a person, never a stack trace. */
  const unary =
    (handle: (req: Request) => Promise<object> | object) =>
    (call: ServerUnaryCall<Request, object>, callback: sendUnaryData<object>) => {
      Promise.resolve()
        .then(() => handle(call.request))
        .then(
          (answer) => callback(null, answer),
          (err: unknown) => {
            const answer = answerOf(err);
            if (answer.code !== status.ABORTED)
              o.log({
                msg: 'refused',
                code: status[answer.code],
                message: answer.details,
                volume: call.request.volume_id,
              });
            callback(answer);
          },
        );
    };

  return {
    identity: {
      GetPluginInfo: unary(() => ({ name: o.driver, vendor_version: o.version })),
      GetPluginCapabilities: unary(() => ({ capabilities: [] })),
      Probe: unary(() => ({ ready: { value: true } })),
    },
    node: {
      NodeGetCapabilities: unary(() => ({ capabilities: [] })),
      NodeGetInfo: unary(() => ({ node_id: o.nodeId, max_volumes_per_node: 0 })),
      NodePublishVolume: unary(publishOnce),
      NodeUnpublishVolume: unary(unpublish),
    },
  };
}
