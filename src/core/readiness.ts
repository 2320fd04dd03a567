// What a Deployment's and its autoscaler's own status say about a rollout. Pure.
import type { Readiness } from './status.js';

type ConditionView = { type: string; status: string; reason?: string; message?: string };

/** The status fields of a Deployment that say how its rollout goes (readiness, and the informer's filter). */
export interface RolloutStatus {
  observedGeneration?: number;
  replicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  updatedReplicas?: number;
  conditions?: ConditionView[];
}

/** The fields of a Deployment that readiness reads. */
export interface DeploymentView {
  metadata?: { generation?: number };
  spec?: { replicas?: number };
  status?: RolloutStatus;
}

/** The fields of a HorizontalPodAutoscaler that readiness reads. */
export interface AutoscalerView {
  status?: { conditions?: ConditionView[] | null };
}

function summary(c: ConditionView): NonNullable<Readiness['available']> {
  return { status: c.status as 'True' | 'False' | 'Unknown', reason: c.reason ?? '', message: c.message ?? '' };
}

const deploymentMissing: Readiness = {
  found: false,
  desiredReplicas: 0,
  replicas: 0,
  readyReplicas: 0,
  availableReplicas: 0,
  updatedReplicas: 0,
  observedLatest: false,
};

/** `hpa` only for a model that has an autoscaler. */
export function readinessOf(d: DeploymentView | undefined, hpa?: AutoscalerView): Readiness {
  if (!d) return deploymentMissing;
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
  // The ReplicaSet cannot create Pods (Pod Security, a ResourceQuota, a LimitRange, a webhook): in the
  // apiserver's words, which the Deployment copies from its ReplicaSet.
  const refused = d.status?.conditions?.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  if (refused)
    readiness.containers = {
      kind: 'pod-refused',
      pods: Math.max(readiness.desiredReplicas - readiness.replicas, 1),
      container: '',
      reason: refused.reason ?? 'FailedCreate',
      message: refused.message ?? '',
    };
  if (hpa) {
    const active = hpa.status?.conditions?.find((c) => c.type === 'ScalingActive');
    readiness.autoscaler = active ? { scalingActive: summary(active) } : {};
  }
  return readiness;
}
