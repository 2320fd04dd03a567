// Which watch events can change a reconcile's outcome, and which workflow they wake. Pure apart from
// the memory of what was last seen per object, which a re-list may replay without consequence.
import { isModelController, labels, resyncAnnotation } from '../core/api.js';
import { troubleFingerprint, type PodHealthView } from '../core/container-troubles.js';
import { unschedulablePods } from '../core/pod-scheduling.js';
import { cacheVolumeName } from '../core/model-source.js';
import type { RolloutStatus } from '../core/readiness.js';
import type { ReconcileHint } from '../../workflows/definitions.js';

export type WatchedKind = 'MachineModel' | 'Deployment' | 'Service' | 'HorizontalPodAutoscaler' | 'HTTPRoute' | 'Pod';
export type WatchEventType = 'added' | 'updated' | 'deleted';

/** Loose view of any watched object: only the fields the filter reads. */
export interface WatchedObject {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    deletionTimestamp?: unknown;
    finalizers?: string[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
  };
  spec?: unknown;
  status?: RolloutStatus;
}

/** A probe that failed, or the model cache's volume that the kubelet could not mount: news for the model. */
const wakesModel = (message: string) =>
  message.startsWith('Readiness probe failed') || message.includes(`for volume "${cacheVolumeName}"`);

/** What of a kubelet's `Unhealthy` or `FailedMount` Event about a Pod the filter reads. */
export interface ProbeEventView {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  message?: string;
}

export interface SignalRequest {
  namespace: string;
  name: string;
  /** `reconcile` starts the workflow if needed; `deleted` only tells a running one. */
  signal: 'reconcile' | 'deleted';
  hint: ReconcileHint;
  uid?: string;
}

/** The MachineModel a watched object belongs to. */
export function modelKeyOf(kind: WatchedKind, obj: WatchedObject): { namespace: string; name: string } | undefined {
  const namespace = obj.metadata?.namespace;
  if (!namespace) return undefined;
  if (kind === 'MachineModel') return obj.metadata?.name ? { namespace, name: obj.metadata.name } : undefined;
  const name = obj.metadata?.ownerReferences?.find(isModelController)?.name ?? obj.metadata?.labels?.[labels.instance];
  return name ? { namespace, name } : undefined;
}

/** The uid of the MachineModel a watched object belongs to, when the object says. */
function modelUidOf(kind: WatchedKind, obj: WatchedObject): string | undefined {
  if (kind === 'MachineModel') return obj.metadata?.uid;
  return obj.metadata?.ownerReferences?.find(isModelController)?.uid;
}

/**
 * The fields whose change can change a reconcile's outcome. A MachineModel's own status writes,
 * labels and annotations (other than the resync annotation) are left out: they would only make
 * the workflow look again and find nothing to do.
 */
export function fingerprint(kind: WatchedKind, obj: WatchedObject): string {
  const m = obj.metadata ?? {};
  const common = [m.uid, m.deletionTimestamp ? 'deleting' : ''];
  const owners = (m.ownerReferences ?? []).map((o) => `${o.kind}/${o.name}/${o.uid}/${o.controller ?? false}`).sort();
  switch (kind) {
    case 'MachineModel':
      return JSON.stringify([
        ...common,
        m.generation,
        [...(m.finalizers ?? [])].sort(),
        m.annotations?.[resyncAnnotation],
      ]);
    case 'Deployment': {
      const s = obj.status ?? {};
      // What readiness reads (src/core/readiness.ts). Not Progressing: the operator keeps its own
      // progress deadline, and the condition's first appearance on a new Deployment would cost a round.
      const available = s.conditions?.find((c) => c.type === 'Available')?.status;
      return JSON.stringify([
        ...common,
        m.generation,
        owners,
        m.labels,
        s.observedGeneration,
        s.replicas,
        s.readyReplicas,
        s.availableReplicas,
        s.updatedReplicas,
        available,
      ]);
    }
    case 'HorizontalPodAutoscaler': {
      // Whether it can scale, not its every 15 s status refresh.
      const active = obj.status?.conditions?.find((c) => c.type === 'ScalingActive')?.status;
      return JSON.stringify([...common, owners, m.labels, obj.spec, active]);
    }
    case 'Service':
    case 'HTTPRoute':
      return JSON.stringify([...common, owners, m.labels, obj.spec]);
    case 'Pod': {
      const parts = [unschedulablePods([obj])?.message ?? '', troubleFingerprint(obj as PodHealthView)];
      return parts.every((p) => p === '') ? placeable : JSON.stringify(parts);
    }
  }
}

/**
 * A child appearing under its model's controller reference was created by that model's round, the
 * only writer of such a reference, which reads what it wrote: its echo would cost the workflow a task
 * and change nothing. At start-up the model's own listing signals it; after a reconnect the relist
 * looks again at every model; what happens to the child afterwards (its status, drift) signals.
 */
function createdByItsModel(obj: WatchedObject): boolean {
  return !!obj.metadata?.ownerReferences?.some(isModelController);
}

/** The fingerprint of a Pod the scheduler has placed (or has not yet tried to) whose containers are fine. */
const placeable = '';

/**
 * Remembers the last fingerprint per object and which MachineModels exist, and turns relevant events
 * into signal requests. A child whose model does not exist (its garbage collection after the model
 * went) wakes nobody: signalling it would start a workflow run only to find nothing. A model's own
 * events always signal, so children seen before their model's first listing lose nothing.
 */
export class ChangeFilter {
  private readonly seen = new Map<string, string>();
  private readonly models = new Set<string>();

  observe(kind: WatchedKind, type: WatchEventType, obj: WatchedObject): SignalRequest | undefined {
    const key = modelKeyOf(kind, obj);
    if (!key) return undefined;
    const modelId = `${key.namespace}/${key.name}`;
    if (kind === 'MachineModel') {
      if (type === 'deleted') this.models.delete(modelId);
      else this.models.add(modelId);
    } else if (!this.models.has(modelId)) {
      return undefined;
    }
    const id = `${kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`;
    const hint: ReconcileHint = {
      source: kind,
      event: type,
      resourceVersion: obj.metadata?.resourceVersion,
      generation: obj.metadata?.generation,
      uid: modelUidOf(kind, obj),
    };
    if (kind === 'Pod') return this.observePod(type, obj, id) ? { ...key, signal: 'reconcile', hint } : undefined;
    if (type === 'deleted') {
      this.seen.delete(id);
      if (kind === 'MachineModel') return { ...key, signal: 'deleted', hint, uid: obj.metadata?.uid };
      return { ...key, signal: 'reconcile', hint };
    }
    const print = fingerprint(kind, obj);
    if (this.seen.get(id) === print) return undefined;
    this.seen.set(id, print);
    if (type === 'added' && kind !== 'MachineModel' && createdByItsModel(obj)) return undefined;
    return { ...key, signal: 'reconcile', hint };
  }

  /**
   * Whether the scheduler's verdict on a Pod changed. The rest of a Pod's life shows in its
   * Deployment's status, which is watched; only stuck Pods are remembered, so the memory stays small.
   */
  private observePod(type: WatchEventType, obj: WatchedObject, id: string): boolean {
    const before = this.seen.get(id) ?? placeable;
    const after = type === 'deleted' ? placeable : fingerprint('Pod', obj);
    if (after === placeable) this.seen.delete(id);
    else this.seen.set(id, after);
    return before !== after;
  }

  /**
   * A readiness probe failure of one of a model's Pods (the informer finds the model from its Pod
   * cache). The kubelet writes no probe result into the Pod, only this Event; the model looks again
   * when a failure is new, so its Ready condition quotes the probe at once. A repeat of the same
   * failure is the same Event with a higher count: it wakes nobody.
   */
  observeProbe(
    type: WatchEventType,
    event: ProbeEventView,
    model: { namespace: string; name: string } | undefined,
  ): SignalRequest | undefined {
    const id = `Event/${event.metadata?.namespace}/${event.metadata?.name}`;
    if (type === 'deleted') {
      this.seen.delete(id);
      return undefined;
    }
    if (!model || !this.models.has(`${model.namespace}/${model.name}`)) return undefined;
    if (!event.message || !wakesModel(event.message) || this.seen.get(id) === event.message) return undefined;
    this.seen.set(id, event.message);
    return {
      ...model,
      signal: 'reconcile',
      hint: { source: 'Event', event: type, resourceVersion: event.metadata?.resourceVersion },
    };
  }

  /** Drops what it remembers of the namespaces `drop` names (a shard this replica no longer holds). */
  forget(drop: (namespace: string) => boolean): void {
    for (const id of this.seen.keys()) if (drop(id.split('/')[1] ?? '')) this.seen.delete(id);
    for (const id of this.models) if (drop(id.split('/')[0] ?? '')) this.models.delete(id);
  }

  /** After a reconnect: look again at the object's model, unless that model is known to be gone. */
  lookAgain(kind: WatchedKind, obj: WatchedObject): SignalRequest | undefined {
    const key = modelKeyOf(kind, obj);
    if (!key || (kind !== 'MachineModel' && !this.models.has(`${key.namespace}/${key.name}`))) return undefined;
    return { ...key, signal: 'reconcile', hint: { source: kind, event: 'relisted', uid: modelUidOf(kind, obj) } };
  }
}
