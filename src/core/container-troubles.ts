// Why a model's containers do not become ready, from the Pods' container statuses. Pure.
//
// The Deployment's status says only how many replicas are ready; the kubelet writes why the others
// are not into each Pod: an image it cannot pull, a container that exits (or is killed for memory),
// a readiness probe that has not passed. Read at once, these turn a ten-minute wait for the progress
// deadline into a clear message. A model in storage waits for its volume first: the model cache's
// plugin says why in the kubelet's FailedMount Events, in the store's words (mountTrouble).
import { cacheVolumeName } from './model-source.js';

export interface ContainerStateView {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string | Date };
  terminated?: { reason?: string; message?: string; exitCode?: number };
}

export interface ContainerStatusView {
  name: string;
  image?: string;
  ready?: boolean;
  restartCount?: number;
  state?: ContainerStateView;
  lastState?: ContainerStateView;
}

/** The fields of a Pod that say how its containers fare. */
export interface PodHealthView {
  metadata?: { name?: string; deletionTimestamp?: unknown };
  spec?: { containers?: { name: string; resources?: { limits?: Record<string, string> } }[] };
  status?: {
    containerStatuses?: ContainerStatusView[];
    initContainerStatuses?: ContainerStatusView[];
    conditions?: { type: string; status: string }[];
  };
}

export type ContainerTrouble =
  /** The image cannot be pulled: a person must fix the name, the tag or the registry's credentials. */
  | { kind: 'image-pull'; pods: number; container: string; image: string; reason: string; message: string }
  /** The container exits or is killed, again and again. */
  | {
      kind: 'crash-loop';
      pods: number;
      container: string;
      restarts: number;
      /** How it last ended: OOMKilled, Error, Completed... */
      lastReason: string;
      exitCode?: number;
      /** The container's own termination message, when it wrote one. */
      message?: string;
      memoryLimit?: string;
    }
  /** The runtime cannot create or start the container (a missing ConfigMap, an invalid command...). */
  | { kind: 'cannot-start'; pods: number; container: string; reason: string; message: string }
  /** Running, not ready: still loading, or a readiness probe that fails. Progressing, not failed. */
  | { kind: 'not-ready'; pods: number; container: string; probeMessage?: string }
  /** The model's artifact cannot be had (not found, forbidden, bad credentials, no Secret, a wrong sum): a person must act. */
  | { kind: 'model-unavailable'; pods: number; container: string; message: string }
  /** The apiserver refuses the model's Pods (the Deployment's ReplicaFailure): Pod Security, a quota, a webhook. */
  | { kind: 'pod-refused'; pods: number; container: string; reason: string; message: string }
  /** The node's model cache, or the namespace's share of it, cannot hold the artifact. */
  | { kind: 'cache-full' | 'quota-exceeded'; pods: number; container: string; message: string }
  /** Fetching the artifact failed in a way that passes (5xx, throttling, a timeout): the kubelet tries again. */
  | { kind: 'fetch-retrying'; pods: number; container: string; message: string }
  /** The artifact is being fetched into the node's cache; `progress` is the plugin's line ("96.0 MiB of 256.0 MiB, …"). */
  | { kind: 'fetching'; pods: number; container: string; progress?: string };

const imagePullReasons: ReadonlySet<string> = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
]);
const cannotStartReasons: ReadonlySet<string> = new Set([
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'PreCreateHookError',
  'PostStartHookError',
]);

type Found = { pod: PodHealthView; status: ContainerStatusView };

/**
 * Pods on a node whose containers the runtime has not created yet: waiting in ContainerCreating, or
 * placed with no container status at all (the kubelet mounts volumes before it writes any).
 */
export function podsWaitingForVolumes(pods: PodHealthView[]): PodHealthView[] {
  return pods.filter((p) => {
    if (p.metadata?.deletionTimestamp) return false;
    const statuses = p.status?.containerStatuses ?? [];
    if (statuses.length === 0)
      return p.status?.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'True');
    return statuses.some((c) => c.state?.waiting?.reason === 'ContainerCreating');
  });
}

/**
 * Why the model cache's volume is not mounted, from the kubelet's latest FailedMount message for a
 * Pod: the plugin's gRPC code and its words ("rpc error: code = NotFound desc = s3://…: 404 NoSuchKey"),
 * or the kubelet's own (a Secret it cannot read, a driver not registered on the node).
 */
export function mountTrouble(message: string | undefined, pods: number): ContainerTrouble | undefined {
  if (!message?.includes(`for volume "${cacheVolumeName}"`)) return undefined;
  const container = cacheVolumeName;
  const rpc = /rpc error: code = (\w+) desc = ([\s\S]*)$/.exec(message);
  if (!rpc) {
    const said = message
      .slice(message.indexOf(' : ') + 3)
      .replace(/^kubernetes\.io\/csi: /, '')
      .trim();
    // The plugin is not running on the node (yet): an installation's trouble, which passes once it starts.
    if (/not found in the list of registered CSI drivers/.test(said))
      return {
        kind: 'fetch-retrying',
        pods,
        container,
        message: `the model cache is not running on the node: ${said}`,
      };
    return { kind: 'model-unavailable', pods, container, message: said };
  }
  const [, code, desc] = rpc as unknown as [string, string, string];
  const words = desc.trim();
  switch (code) {
    case 'Aborted':
      return {
        kind: 'fetching',
        pods,
        container,
        // "fetching <uri> into the node's cache: 96.0 MiB of 256.0 MiB, 16.0 MiB/s" (a URI may hold spaces).
        progress: /^fetching .* into the node's cache: (.*)$/.exec(words)?.[1],
      };
    case 'ResourceExhausted':
      return words.startsWith('QuotaExceeded: ')
        ? { kind: 'quota-exceeded', pods, container, message: words.slice('QuotaExceeded: '.length) }
        : { kind: 'cache-full', pods, container, message: words.replace(/^CacheFull: /, '') };
    case 'NotFound':
    case 'PermissionDenied':
    case 'FailedPrecondition':
    case 'InvalidArgument':
    case 'Unauthenticated':
      return { kind: 'model-unavailable', pods, container, message: words };
    default:
      return { kind: 'fetch-retrying', pods, container, message: words };
  }
}

/** The most serious trouble among the live Pods, or undefined when every container is ready or starting. */
export function containerTroubles(pods: PodHealthView[]): ContainerTrouble | undefined {
  const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
  const all: Found[] = live.flatMap((pod) =>
    [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map((status) => ({
      pod,
      status,
    })),
  );
  const matching = (test: (s: ContainerStatusView) => boolean) => all.filter((f) => test(f.status));
  const podCount = (found: Found[]) => new Set(found.map((f) => f.pod)).size;

  /** The first container waiting for one of `reasons`, with how many Pods have one. */
  const waitingFor = (reasons: ReadonlySet<string>) => {
    const found = matching((s) => reasons.has(s.state?.waiting?.reason ?? ''));
    if (found.length === 0) return undefined;
    const { status } = found[0]!;
    const { reason = '', message = '' } = status.state?.waiting ?? {};
    return { pods: podCount(found), container: status.name, image: status.image ?? '', reason, message };
  };

  const pull = waitingFor(imagePullReasons);
  if (pull) return { kind: 'image-pull', ...pull };
  const crashes = matching(crashing);
  if (crashes.length > 0) {
    const { pod, status } = crashes[0]!;
    const ended = status.state?.terminated ?? status.lastState?.terminated ?? {};
    const limit = pod.spec?.containers?.find((c) => c.name === status.name)?.resources?.limits?.memory;
    return {
      kind: 'crash-loop',
      pods: podCount(crashes),
      container: status.name,
      restarts: status.restartCount ?? 0,
      lastReason: ended.reason ?? 'Unknown',
      exitCode: ended.exitCode,
      message: ended.message?.trim() || undefined,
      memoryLimit: limit,
    };
  }
  const stuck = waitingFor(cannotStartReasons);
  if (stuck)
    return {
      kind: 'cannot-start',
      pods: stuck.pods,
      container: stuck.container,
      reason: stuck.reason,
      message: stuck.message,
    };
  const unready = matching((s) => !!s.state?.running && s.ready === false);
  if (unready.length > 0) return { kind: 'not-ready', pods: podCount(unready), container: unready[0]!.status.name };
  return undefined;
}

/**
 * Ended with a failure and not (yet) proven healthy since: waiting in CrashLoopBackOff, terminated
 * now, or restarted after a failure and not ready. A container that restarted and became ready is fine.
 */
function crashing(s: ContainerStatusView): boolean {
  if (s.state?.waiting?.reason === 'CrashLoopBackOff') return true;
  if (s.state?.terminated && s.state.terminated.exitCode !== 0) return true;
  return (s.restartCount ?? 0) > 0 && s.ready !== true && !!s.lastState?.terminated;
}

/**
 * A trouble as one line for a person (the Ready condition's message, the Event). Without the details
 * (the runtime's or the probe's message), it fits a step summary in the Web UI.
 */
export function describeTrouble(t: ContainerTrouble, details = true): string {
  const pods = t.pods === 1 ? '1 pod' : `${t.pods} pods`;
  const detail = (message: string | undefined) => (details && message ? `: ${message}` : '');
  switch (t.kind) {
    case 'image-pull':
      return `image ${t.image || '(unknown)'} cannot be pulled (${t.reason}, ${pods})${detail(t.message)}`;
    case 'crash-loop': {
      const how =
        t.lastReason === 'OOMKilled'
          ? `killed for using more memory than its limit${t.memoryLimit ? ` of ${t.memoryLimit}` : ''} (OOMKilled)`
          : `ended with ${t.lastReason}${t.exitCode !== undefined ? ` (exit code ${t.exitCode})` : ''}`;
      const restarts = t.restarts === 1 ? '1 restart' : `${t.restarts} restarts`;
      return `container ${t.container} keeps crashing (${restarts}, ${pods}): last ${how}${detail(t.message)}`;
    }
    case 'cannot-start':
      return `container ${t.container} cannot start (${t.reason}, ${pods})${detail(t.message)}`;
    case 'not-ready':
      return `container ${t.container} is running but not ready (${pods})${detail(t.probeMessage)}`;
    case 'model-unavailable':
      return `the model cannot be fetched (${pods})${detail(t.message)}`;
    case 'pod-refused':
      return `the model's pods cannot be created (${t.reason}, ${pods})${detail(t.message)}`;
    case 'cache-full':
      return `the node's model cache has no room for the model (${pods})${detail(t.message)}`;
    case 'quota-exceeded':
      return `the namespace's share of the node's model cache is used up (${pods})${detail(t.message)}`;
    case 'fetch-retrying':
      return `fetching the model failed, retrying (${pods})${detail(t.message)}`;
    case 'fetching':
      return `fetching the model into the node's cache (${pods})${detail(t.progress)}`;
  }
}

/** The Ready condition's reason for a trouble. */
export const troubleReasons: Record<ContainerTrouble['kind'], string> = {
  'image-pull': 'ImagePullFailed',
  'crash-loop': 'CrashLoopBackOff',
  'cannot-start': 'ContainerCannotStart',
  'not-ready': 'ContainerNotReady',
  'model-unavailable': 'ModelUnavailable',
  'pod-refused': 'PodsRefused',
  'cache-full': 'CacheFull',
  'quota-exceeded': 'QuotaExceeded',
  'fetch-retrying': 'ModelFetchRetrying',
  fetching: 'ModelFetching',
};

/** Troubles that need a person: the model is Failed (and Stalled) until the spec or the cluster changes. */
export function needsAPerson(t: ContainerTrouble): boolean {
  return t.kind !== 'not-ready' && t.kind !== 'fetch-retrying' && t.kind !== 'fetching';
}

/** What of a Pod's container health the informer compares between events: a change wakes the model. */
export function troubleFingerprint(pod: PodHealthView): string {
  const t = containerTroubles([pod]);
  if (!t) return '';
  return t.kind === 'crash-loop'
    ? `${t.kind}/${t.lastReason}/${t.exitCode}`
    : `${t.kind}/${'reason' in t ? t.reason : ''}`;
}
