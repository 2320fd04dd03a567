import type { V1Deployment, V2HorizontalPodAutoscaler } from '@kubernetes/client-node';
import type { ModelRef } from '../src/core/api.js';
import { unschedulablePods } from '../src/core/pod-scheduling.js';
import { readinessOf } from '../src/core/readiness.js';
import { isReady, type Readiness } from '../src/core/status.js';
import type { ActivityDeps } from './deps.js';
import { kubeFailure } from './failure.js';

/** Only a rollout that waits is worth a pod listing: it may be waiting for the scheduler. */
export async function withScheduling(
  kube: ActivityDeps['kube'],
  ref: ModelRef,
  readiness: Readiness,
): Promise<Readiness> {
  if (isReady(readiness)) return readiness;
  const pods = await kube.listPods(ref.namespace, ref.name).catch((err: unknown) => {
    throw kubeFailure(err, `listing the Pods of ${ref.namespace}/${ref.name}`);
  });
  const unschedulable = unschedulablePods(pods);
  return unschedulable ? { ...readiness, unschedulable } : readiness;
}

/**
 * Kept for runs that started before applyChildren reported readiness itself (the `cheap-rounds`
 * patch): they call it after applyChildren.
 */
export function observeReadinessActivity({ kube }: ActivityDeps) {
  /** `autoscaler`: whether the model has an HPA (applyChildren says), so models without one cost no extra read. */
  return async function observeReadiness(ref: ModelRef, autoscaler: boolean): Promise<Readiness> {
    const d = await kube.read<V1Deployment>('apps/v1', 'Deployment', ref.namespace, ref.name).catch((err: unknown) => {
      throw kubeFailure(err, `reading Deployment ${ref.namespace}/${ref.name}`);
    });
    if (!d) return readinessOf(undefined);
    const hpa = autoscaler
      ? await kube
          .read<V2HorizontalPodAutoscaler>('autoscaling/v2', 'HorizontalPodAutoscaler', ref.namespace, ref.name)
          .catch((err: unknown) => {
            throw kubeFailure(err, `reading HorizontalPodAutoscaler ${ref.namespace}/${ref.name}`);
          })
      : undefined;
    return withScheduling(kube, ref, readinessOf(d, hpa));
  };
}
