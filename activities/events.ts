import { randomBytes } from 'node:crypto';
import { log } from '@temporalio/activity';
import { apiVersion, kind, type ModelRef } from '../src/api.js';
import type { ActivityDeps } from './deps.js';
import { apiMessage } from '../src/kube-errors.js';

export type EventType = 'Normal' | 'Warning';

/** Records a Kubernetes Event on the MachineModel; best effort, since an Event must never fail a reconcile. */
export async function recordEvent(kube: ActivityDeps['kube'], ref: ModelRef, type: EventType, reason: string, message: string): Promise<void> {
  const now = new Date().toISOString();
  try {
    await kube.core.createNamespacedEvent({
      namespace: ref.namespace,
      body: {
        metadata: { name: `${ref.name}.${randomBytes(8).toString('hex')}`, namespace: ref.namespace },
        involvedObject: { apiVersion, kind, name: ref.name, namespace: ref.namespace, uid: ref.uid },
        type,
        reason,
        message,
        source: { component: 'machinemodel-operator' },
        reportingComponent: 'machinemodel-operator',
        reportingInstance: process.env.HOSTNAME ?? 'machinemodel-operator',
        action: reason,
        firstTimestamp: new Date(now),
        lastTimestamp: new Date(now),
        count: 1,
      },
    });
  } catch (err) {
    log.warn('could not record event', { reason, error: apiMessage(err) });
  }
}

export function recordEventActivity({ kube }: ActivityDeps) {
  return async function recordModelEvent(ref: ModelRef, type: EventType, reason: string, message: string): Promise<void> {
    await recordEvent(kube, ref, type, reason, message);
  };
}
