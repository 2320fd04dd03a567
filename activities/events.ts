import { createHash } from 'node:crypto';
import { log } from '@temporalio/activity';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { apiVersion, kind, type ModelRef } from '../src/core/api.js';
import type { ActivityDeps } from './deps.js';
import { apiMessage, apiStatus } from '../src/process/kube-errors.js';

export type EventType = 'Normal' | 'Warning';

/** One Event object per model, type, reason and message: a repeat raises its count, as kubectl's recorder does. */
export function eventName(ref: ModelRef, type: EventType, reason: string, message: string): string {
  const digest = createHash('sha256').update([ref.uid, type, reason, message].join('\n')).digest('hex').slice(0, 16);
  return `${ref.name}.${digest}`;
}

/** Records a Kubernetes Event on the MachineModel, or counts a repeat of the same one. */
export async function recordEvent(
  kube: ActivityDeps['kube'],
  ref: ModelRef,
  type: EventType,
  reason: string,
  message: string,
): Promise<void> {
  const now = new Date();
  const name = eventName(ref, type, reason, message);
  try {
    await kube.core.createNamespacedEvent({
      namespace: ref.namespace,
      body: {
        metadata: { name, namespace: ref.namespace },
        involvedObject: { apiVersion, kind, name: ref.name, namespace: ref.namespace, uid: ref.uid },
        type,
        reason,
        message,
        source: { component: 'machinemodel-operator' },
        reportingComponent: 'machinemodel-operator',
        reportingInstance: process.env.HOSTNAME ?? 'machinemodel-operator',
        action: reason,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  } catch (err) {
    if (apiStatus(err) !== 409) throw err;
    const existing = await kube.core.readNamespacedEvent({ namespace: ref.namespace, name });
    await kube.core.patchNamespacedEvent(
      { namespace: ref.namespace, name, body: { count: (existing.count ?? 1) + 1, lastTimestamp: now } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

/** In an activity: an Event must never fail a reconcile, so a failure to record one is only logged. */
export async function recordEventBestEffort(
  kube: ActivityDeps['kube'],
  ref: ModelRef,
  type: EventType,
  reason: string,
  message: string,
): Promise<void> {
  await recordEvent(kube, ref, type, reason, message).catch((err: unknown) => {
    log.warn('could not record event', { reason, error: apiMessage(err) });
  });
}

export function recordEventActivity({ kube }: ActivityDeps) {
  return async function recordModelEvent(
    ref: ModelRef,
    type: EventType,
    reason: string,
    message: string,
  ): Promise<void> {
    await recordEventBestEffort(kube, ref, type, reason, message);
  };
}
