import type { V1Deployment, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import type { ModelRef } from '../src/core/api.js';
import { selectorString } from '../src/core/desired-state.js';
import { unschedulablePods } from '../src/core/pod-scheduling.js';
import { isReady, type Readiness } from '../src/core/status.js';
import type { ActivityDeps } from './deps.js';
import { kubeFailure } from './failure.js';

type ConditionSummary = { status: 'True' | 'False' | 'Unknown'; reason: string; message: string };

function summary(c: { status: string; reason?: string; message?: string }): ConditionSummary {
  return { status: c.status as ConditionSummary['status'], reason: c.reason ?? '', message: c.message ?? '' };
}

export function observeReadinessActivity({ kube }: ActivityDeps) {
  /** `autoscaler`: whether the model has an HPA (applyChildren says), so models without one cost no extra read. */
  return async function observeReadiness(ref: ModelRef, autoscaler: boolean): Promise<Readiness> {
    const d = await kube.read<V1Deployment>('apps/v1', 'Deployment', ref.namespace, ref.name).catch((err: unknown) => {
      throw kubeFailure(err, `reading Deployment ${ref.namespace}/${ref.name}`);
    });
    if (!d) {
      return {
        found: false,
        desiredReplicas: 0,
        replicas: 0,
        readyReplicas: 0,
        availableReplicas: 0,
        updatedReplicas: 0,
        observedLatest: false,
      };
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
      available: available ? summary(available) : undefined,
    };
    const hpa = autoscaler
      ? await kube
          .read<V2HorizontalPodAutoscaler>('autoscaling/v2', 'HorizontalPodAutoscaler', ref.namespace, ref.name)
          .catch((err: unknown) => {
            throw kubeFailure(err, `reading HorizontalPodAutoscaler ${ref.namespace}/${ref.name}`);
          })
      : undefined;
    if (hpa) {
      const active = hpa.status?.conditions?.find((c) => c.type === 'ScalingActive');
      readiness.autoscaler = active ? { scalingActive: summary(active) } : {};
    }
    if (isReady(readiness)) return readiness;
    // Only a rollout that waits is worth a pod listing: it may be waiting for the scheduler.
    const pods = await kube.listPods(ref.namespace, selectorString(ref.name)).catch((err: unknown) => {
      throw kubeFailure(err, `listing the Pods of ${ref.namespace}/${ref.name}`);
    });
    const unschedulable = unschedulablePods(pods);
    return unschedulable ? { ...readiness, unschedulable } : readiness;
  };
}
