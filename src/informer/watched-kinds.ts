// What the informer lists and watches, and what of each object its cache keeps.
import type { CoreV1Event, KubernetesObject, V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { childSelector, group, plural, version } from '../core/api.js';
import type { WatchedKind } from './event-filter.js';

export interface SourceSpec {
  kind: WatchedKind | 'Namespace' | 'Event';
  apiVersion: string;
  /** URL path segment of the collection, e.g. apis/apps/v1 + deployments. */
  prefix: string;
  resource: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Strips in place what the operator never reads, before the object is cached. */
  keep?: (obj: KubernetesObject) => void;
}

/**
 * Who applied which field, kilobytes per object: the operator never reads it (its writes are
 * server-side applies of the whole desired state), so no cache keeps it.
 */
export function withoutManagedFields(obj: KubernetesObject): void {
  if (obj.metadata) delete obj.metadata.managedFields;
}

/**
 * A model's Pods are many and large (their managed fields alone are kilobytes); the operator reads
 * only whether the scheduler placed them (src/core/pod-scheduling.ts) and how their containers fare
 * (src/core/container-troubles.ts), so the cache keeps just that.
 */
function keepHealthView(obj: KubernetesObject): void {
  const pod = obj as V1Pod;
  const { name, namespace, uid, resourceVersion, labels, deletionTimestamp } = pod.metadata ?? {};
  pod.metadata = { name, namespace, uid, resourceVersion, labels, deletionTimestamp };
  const health = (statuses: V1ContainerStatus[] | undefined) =>
    statuses?.map(({ name, image, ready, restartCount, state, lastState }) => ({
      name,
      image,
      // Required by the type; container-troubles.ts never reads it.
      imageID: '',
      ready,
      restartCount,
      state,
      lastState,
    }));
  const init = health(pod.status?.initContainerStatuses);
  pod.status = {
    conditions: pod.status?.conditions?.filter((c) => c.type === 'PodScheduled'),
    containerStatuses: health(pod.status?.containerStatuses),
    // A pod template may have init containers of its own: how they fare is the model's health too.
    ...(init ? { initContainerStatuses: init } : {}),
  };
  const containers = pod.spec?.containers.map(({ name, image, resources }) => ({
    name,
    image,
    resources: { limits: resources?.limits },
  }));
  pod.spec = containers ? { containers } : undefined;
}

/** Always watched: the models and the children they own. */
export const mainSources: SourceSpec[] = [
  { kind: 'MachineModel', apiVersion: `${group}/${version}`, prefix: `/apis/${group}/${version}`, resource: plural },
  {
    kind: 'Deployment',
    apiVersion: 'apps/v1',
    prefix: '/apis/apps/v1',
    resource: 'deployments',
    labelSelector: childSelector,
  },
  { kind: 'Service', apiVersion: 'v1', prefix: '/api/v1', resource: 'services', labelSelector: childSelector },
  {
    kind: 'HorizontalPodAutoscaler',
    apiVersion: 'autoscaling/v2',
    prefix: '/apis/autoscaling/v2',
    resource: 'horizontalpodautoscalers',
    labelSelector: childSelector,
  },
];

/**
 * The models' Pods. A Pod no node can place changes no Deployment status: watched, it wakes its
 * model at once, so readiness needs no polling (and no listing: its scheduling is read from here).
 * Optional, as an operator whose role predates it may not watch Pods: then readiness lists them,
 * and an unschedulable Pod is noticed at the next readiness recheck or Deployment change.
 */
export const podSource: SourceSpec = {
  kind: 'Pod',
  apiVersion: 'v1',
  prefix: '/api/v1',
  resource: 'pods',
  labelSelector: childSelector,
  keep: keepHealthView,
};

/**
 * Namespaces, to know which are being deleted: there every child goes with its model, and the
 * children's changes (pods going, so Deployments losing availability) wake no round. Optional: without
 * the permission to watch them, children wake their models as before.
 */
export const namespaceSource: SourceSpec = {
  kind: 'Namespace',
  apiVersion: 'v1',
  prefix: '/api/v1',
  resource: 'namespaces',
};

/**
 * The kubelet's readiness probe failures (`Unhealthy` Events about Pods): a failing probe changes
 * nothing in the Pod, so without them a model would quote its probe only at a readiness recheck.
 * Optional, like the Pod watch. The cache keeps what the filter reads.
 */
export const probeEventSource: SourceSpec = {
  kind: 'Event',
  apiVersion: 'v1',
  prefix: '/api/v1',
  resource: 'events',
  fieldSelector: 'involvedObject.kind=Pod,reason=Unhealthy',
  keep: (obj) => {
    const event = obj as CoreV1Event;
    const { name, namespace, uid, resourceVersion } = event.metadata;
    event.metadata = { name, namespace, uid, resourceVersion };
    event.involvedObject = { kind: event.involvedObject.kind, name: event.involvedObject.name };
    for (const key of ['source', 'reportingComponent', 'reportingInstance', 'firstTimestamp', 'eventTime'] as const)
      delete event[key];
  },
};

/**
 * The kubelet's FailedMount Events about Pods: a volume the model cache cannot mount yet (fetching,
 * refused by the store, the cache full) changes nothing in the Pod either. Optional, like the probes'.
 */
export const mountEventSource: SourceSpec = {
  ...probeEventSource,
  fieldSelector: 'involvedObject.kind=Pod,reason=FailedMount',
};

export const httpRoutes: SourceSpec = {
  kind: 'HTTPRoute',
  apiVersion: 'gateway.networking.k8s.io/v1',
  prefix: '/apis/gateway.networking.k8s.io/v1',
  resource: 'httproutes',
  labelSelector: childSelector,
};
