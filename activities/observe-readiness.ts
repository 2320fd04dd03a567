import type { V1Deployment, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import type { ModelRef } from '../src/api.js';
import { selectorString } from '../src/desired-state.js';
import { unschedulablePods } from '../src/pod-scheduling.js';
import { isReady, type Readiness } from '../src/status.js';
import type { ActivityDeps } from './deps.js';
import { classify } from './errors.js';

export function observeReadinessActivity({ kube }: ActivityDeps) {
  return async function observeReadiness(ref: ModelRef): Promise<Readiness> {
    const d = await kube.read<V1Deployment>('apps/v1', 'Deployment', ref.namespace, ref.name).catch((err: unknown) => {
      throw classify(err, `reading Deployment ${ref.namespace}/${ref.name}`);
    });
    if (!d) {
      return { found: false, desiredReplicas: 0, replicas: 0, readyReplicas: 0, availableReplicas: 0, updatedReplicas: 0, observedLatest: false };
    }
    const available = d.status?.conditions?.find((c) => c.type === 'Available');
    const readiness: Readiness = {
      found: true,
      desiredReplicas: d.spec?.replicas ?? 1,
      replicas: d.status?.replicas ?? 0,
      readyReplicas: d.status?.readyReplicas ?? 0,
      availableReplicas: d.status?.availableReplicas ?? 0,
      updatedReplicas: d.status?.updatedReplicas ?? 0,
      observedLatest: (d.status?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 0),
      available: available
        ? { status: available.status as 'True' | 'False' | 'Unknown', reason: available.reason ?? '', message: available.message ?? '' }
        : undefined,
    };
    const hpa = await kube.read<V2HorizontalPodAutoscaler>('autoscaling/v2', 'HorizontalPodAutoscaler', ref.namespace, ref.name).catch((err: unknown) => {
      throw classify(err, `reading HorizontalPodAutoscaler ${ref.namespace}/${ref.name}`);
    });
    if (hpa) {
      const active = hpa.status?.conditions?.find((c) => c.type === 'ScalingActive');
      readiness.autoscaler = active
        ? { scalingActive: { status: active.status as 'True' | 'False' | 'Unknown', reason: active.reason ?? '', message: active.message ?? '' } }
        : {};
    }
    if (isReady(readiness)) return readiness;
    // Only a rollout that waits is worth a pod listing: it may be waiting for the scheduler.
    const pods = await kube.listPods(ref.namespace, selectorString(ref.name)).catch((err: unknown) => {
      throw classify(err, `listing the Pods of ${ref.namespace}/${ref.name}`);
    });
    const unschedulable = unschedulablePods(pods);
    return unschedulable ? { ...readiness, unschedulable } : readiness;
  };
}
