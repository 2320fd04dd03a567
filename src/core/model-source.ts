// Where a model's weights come from: a path baked into its image (spec.modelPath), or an artifact in
// object storage or on a volume (spec.storageUri, docs/model-storage.md). Workflow-safe: pure.
//
// A revision names its model by one string, its location: the modelPath, or the storageUri with the
// expected sum appended as "@sha256:<hex>" (read like an image digest). A new storageUri or sha256 is
// then a new revision, and the stable and canary Deployments of a rollout each build from their own.
import type { MachineModelSpec } from './api.js';

export type ModelSource =
  | { kind: 'path'; path: string }
  /** Fetched into the node's cache by the model cache's CSI plugin, which mounts it into the Pod. */
  | { kind: 's3'; uri: string; bucket: string; key: string; sha256?: string }
  | { kind: 'https'; uri: string; sha256?: string }
  /** A volume the Pods mount as it is: nothing to fetch. */
  | { kind: 'pvc'; uri: string; claim: string; path: string };

const sumSuffix = /@sha256:([0-9a-f]{64})$/;
export const sha256Pattern = '^[0-9a-f]{64}$';
export const storageUriPattern =
  '^(s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.+|https://[^/\\s]+/.*|pvc://[a-z0-9]([-a-z0-9.]*[a-z0-9])?/.+)$';
const storageUri = new RegExp(storageUriPattern);

/** The model's location, the revision's name for it: modelPath, or storageUri[@sha256:<sum>]. */
export function modelLocation(spec: Pick<MachineModelSpec, 'modelPath' | 'storageUri' | 'sha256'>): string {
  if (!spec.storageUri) return spec.modelPath ?? '';
  return spec.sha256 ? `${spec.storageUri}@sha256:${spec.sha256}` : spec.storageUri;
}

/**
 * Why a storageUri that matches the pattern still cannot be used, or undefined: a URL that does not
 * parse, "." or ".." segments (a URL resolves them, so the request would name another key or
 * bucket), credentials in it (they would show in status and logs), or a sum suffix of its own.
 */
export function storageUriProblem(uri: string): string | undefined {
  if (sumSuffix.test(uri)) return 'must not end in @sha256:<sum>: give the sum as spec.sha256';
  if (/\/(\.|%2e){1,2}(\/|$)/i.test(uri.slice(uri.indexOf('://') + 3))) return 'must not have "." or ".." segments';
  let url: URL;
  try {
    url = new URL(uri.replace(/^(s3|pvc):/, 'https:'));
    decodeURIComponent(url.pathname);
  } catch {
    return 'is not a URL';
  }
  if (url.username || url.password) return 'must not hold credentials: give them in spec.storageSecret';
  return undefined;
}

/** A location read back: what the Pods mount or fetch. A location that is not a storage URI is a path. */
export function modelSource(location: string): ModelSource {
  const sum = sumSuffix.exec(location)?.[1];
  const uri = sum ? location.slice(0, -'@sha256:'.length - 64) : location;
  if (!storageUri.test(uri)) return { kind: 'path', path: location };
  const rest = uri.slice(uri.indexOf('://') + 3);
  const slash = rest.indexOf('/');
  const [head, tail] = [rest.slice(0, slash), rest.slice(slash + 1)];
  if (uri.startsWith('s3://')) return { kind: 's3', uri, bucket: head, key: tail, ...(sum ? { sha256: sum } : {}) };
  if (uri.startsWith('https://')) return { kind: 'https', uri, ...(sum ? { sha256: sum } : {}) };
  return { kind: 'pvc', uri, claim: head, path: tail };
}

/** Whether a source is fetched into the node's cache (not mounted as it is, nor baked in). */
export function isFetched(s: ModelSource): s is Extract<ModelSource, { kind: 's3' | 'https' }> {
  return s.kind === 's3' || s.kind === 'https';
}

/** The artifact's file name in its volume: the URI's last segment, so a server that looks at the extension sees it. */
export function artifactName(s: Extract<ModelSource, { kind: 's3' | 'https' }>): string {
  try {
    const last = new URL(s.uri.replace(/^s3:/, 'https:')).pathname.split('/').pop() ?? '';
    // No leading dot: never a hidden file.
    const safe = decodeURIComponent(last)
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .replace(/^\.+/, '')
      .slice(-200);
    return safe || 'model';
  } catch {
    return 'model';
  }
}

/** How a failed fetch is reported: `unavailable` needs a person (the spec, the store or its Secret); `retrying` passes by itself. */
export type FetchFailureKind = 'unavailable' | 'retrying';

/** An HTTP answer of the store that is not the artifact: 5xx and throttling retry, everything else needs a person. */
export function fetchFailureKind(status: number): FetchFailureKind {
  return status >= 500 || status === 429 || status === 408 ? 'retrying' : 'unavailable';
}

/** The model cache's CSI driver (the plugin's registered name) and the Pods' volume of it. */
export const csiDriverName = 'model-cache.stable.example.com';
export const cacheVolumeName = 'model-cache';
/** Where the model container finds its artifact (read-only). */
export const modelMountPath = '/mnt/models';
