// MachineModel -> the Deployment, Service and HorizontalPodAutoscaler that serve it. Pure.
import {
  apiVersion,
  kind,
  labels,
  labelValues,
  type EndpointType,
  type MachineModelSpec,
  type ModelRef,
} from './api.js';
import { sameQuantity } from './validation.js';
import {
  artifactName,
  cacheVolumeName,
  csiDriverName,
  modelLocation,
  modelMountPath,
  modelSource,
  type ModelSource,
} from './model-source.js';

export interface BuildOptions {
  /** Extended resource name for GPUs (e.g. nvidia.com/gpu, amd.com/gpu). */
  gpuResourceName: string;
  clusterDomain: string;
  /** Target average CPU utilisation (percent) for the autoscaler. */
  targetCPUUtilization: number;
}

export const defaultBuildOptions: BuildOptions = {
  gpuResourceName: 'nvidia.com/gpu',
  clusterDomain: 'cluster.local',
  targetCPUUtilization: 80,
};

interface Endpoint {
  portName: 'http' | 'grpc';
  containerPort: number;
  servicePort: number;
  appProtocol: string;
  scheme: 'http' | 'grpc';
}

const endpoints: Record<EndpointType, Endpoint> = {
  REST: { portName: 'http', containerPort: 8080, servicePort: 80, appProtocol: 'http', scheme: 'http' },
  gRPC: { portName: 'grpc', containerPort: 9000, servicePort: 9000, appProtocol: 'grpc', scheme: 'grpc' },
};

/** Spec with the CRD's defaults filled in, for objects that predate them. */
export function withDefaults(spec: MachineModelSpec): Required<
  Omit<MachineModelSpec, 'resources' | 'gateway' | 'replicas' | 'rollout' | 'storageUri' | 'sha256' | 'storageSecret'>
> & {
  resources: { cpu: string; memory: string; gpu: number };
  replicas?: number;
  /** Where the weights come from (model-source.ts). */
  source: ModelSource;
  storageSecret?: string;
} {
  return {
    image: spec.image,
    modelPath: modelLocation(spec),
    source: modelSource(modelLocation(spec)),
    storageSecret: spec.storageSecret,
    resources: {
      cpu: String(spec.resources.cpu),
      memory: String(spec.resources.memory),
      gpu: spec.resources.gpu ?? 0,
    },
    minReplicas: spec.minReplicas ?? 1,
    maxReplicas: spec.maxReplicas ?? 1,
    replicas: spec.replicas,
    endpointType: spec.endpointType ?? 'REST',
  };
}

export function wantsAutoscaler(spec: MachineModelSpec): boolean {
  const s = withDefaults(spec);
  return s.replicas === undefined && s.maxReplicas > s.minReplicas;
}

export function selectorLabels(name: string): Record<string, string> {
  return { [labels.name]: labelValues.name, [labels.instance]: name };
}

export function childLabels(name: string): Record<string, string> {
  return { ...selectorLabels(name), [labels.managedBy]: labelValues.managedBy };
}

/** The label selector string a scale subresource reports, so an HPA could target the MachineModel itself. */
export function selectorString(name: string): string {
  return Object.entries(selectorLabels(name))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

export function inferenceURL(
  ref: Pick<ModelRef, 'namespace' | 'name'>,
  spec: MachineModelSpec,
  opts: BuildOptions,
): string {
  const e = endpoints[withDefaults(spec).endpointType];
  return `${e.scheme}://${ref.name}.${ref.namespace}.svc.${opts.clusterDomain}:${e.servicePort}`;
}

function metadata(ref: ModelRef) {
  return {
    name: ref.name,
    namespace: ref.namespace,
    labels: childLabels(ref.name),
    ownerReferences: [{ apiVersion, kind, name: ref.name, uid: ref.uid, controller: true, blockOwnerDeletion: true }],
  };
}

/**
 * What the `restricted` Pod Security Standard asks of a Pod and its containers, so models run in
 * namespaces that enforce it. The image must run as a numeric non-root user (USER 65532 in ours).
 */
const restrictedPod = { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } };
const restrictedContainer = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };

/**
 * What the model's Pods need for a model in storage: the model container's environment and mounts, and
 * for an artifact to fetch, a read-only volume of the model cache's CSI driver. The node's plugin
 * fetches, verifies and mounts it, with the Secret the kubelet hands it for that one publish: no init
 * container, no hostPath, nothing run as root in the tenant's namespace.
 */
function modelStorage(source: ModelSource, secret: string | undefined) {
  if (source.kind === 'path') return { env: [{ name: 'MODEL_PATH', value: source.path }] };
  const mount = { name: cacheVolumeName, mountPath: modelMountPath, readOnly: true };
  if (source.kind === 'pvc')
    return {
      env: [
        { name: 'MODEL_PATH', value: `${modelMountPath}/${source.path}` },
        { name: 'STORAGE_URI', value: source.uri },
        { name: 'MODEL_SOURCE', value: source.uri },
      ],
      mounts: [mount],
      volumes: [{ name: cacheVolumeName, persistentVolumeClaim: { claimName: source.claim, readOnly: true } }],
    };
  const location = modelLocation({ storageUri: source.uri, sha256: source.sha256 });
  return {
    env: [
      { name: 'MODEL_PATH', value: `${modelMountPath}/${artifactName(source)}` },
      { name: 'STORAGE_URI', value: source.uri },
      // The revision's name for its model (the URI and its sum), which the next round reads back.
      { name: 'MODEL_SOURCE', value: location },
    ],
    mounts: [mount],
    volumes: [
      {
        name: cacheVolumeName,
        csi: {
          driver: csiDriverName,
          readOnly: true,
          volumeAttributes: { uri: source.uri, ...(source.sha256 ? { sha256: source.sha256 } : {}) },
          // The store's endpoint and keys: the kubelet reads the Secret and hands it to the plugin.
          ...(secret ? { nodePublishSecretRef: { name: secret } } : {}),
        },
      },
    ],
  };
}

/**
 * The Deployment. A fixed size (`spec.replicas`) is what it says. Without an autoscaler the operator
 * owns `replicas` (= minReplicas). With one it keeps whatever the autoscaler chose (`liveReplicas`),
 * clamped to the bounds, so the two never fight.
 */
export function buildDeployment(ref: ModelRef, spec: MachineModelSpec, opts: BuildOptions, liveReplicas?: number) {
  const s = withDefaults(spec);
  const e = endpoints[s.endpointType];
  const replicas =
    s.replicas ??
    (wantsAutoscaler(spec)
      ? Math.min(Math.max(liveReplicas ?? s.minReplicas, s.minReplicas), s.maxReplicas)
      : s.minReplicas);
  const gpu = s.resources.gpu > 0 ? { [opts.gpuResourceName]: String(s.resources.gpu) } : {};
  const storage = modelStorage(s.source, s.storageSecret);
  const probe =
    s.endpointType === 'REST'
      ? { httpGet: { path: '/healthz', port: e.portName } }
      : { grpc: { port: e.containerPort } };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata(ref),
    spec: {
      replicas,
      selector: { matchLabels: selectorLabels(ref.name) },
      template: {
        metadata: { labels: childLabels(ref.name) },
        spec: {
          // A model server needs no Kubernetes API: no token to steal from it.
          automountServiceAccountToken: false,
          securityContext: restrictedPod,
          ...(storage.volumes ? { volumes: storage.volumes } : {}),
          containers: [
            {
              name: 'model',
              securityContext: restrictedContainer,
              image: s.image,
              env: [
                ...storage.env,
                { name: 'MODEL_NAME', value: ref.name },
                { name: 'PORT', value: String(e.containerPort) },
              ],
              ...(storage.mounts ? { volumeMounts: storage.mounts } : {}),
              ports: [{ name: e.portName, containerPort: e.containerPort, protocol: 'TCP' }],
              resources: {
                requests: { cpu: s.resources.cpu, memory: s.resources.memory, ...gpu },
                limits: { cpu: s.resources.cpu, memory: s.resources.memory, ...gpu },
              },
              readinessProbe: { ...probe, periodSeconds: 10, failureThreshold: 3 },
            },
          ],
        },
      },
    },
  };
}

export function buildService(ref: ModelRef, spec: MachineModelSpec) {
  const e = endpoints[withDefaults(spec).endpointType];
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadata(ref),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(ref.name),
      ports: [
        { name: e.portName, port: e.servicePort, targetPort: e.portName, protocol: 'TCP', appProtocol: e.appProtocol },
      ],
    },
  };
}

export function buildAutoscaler(ref: ModelRef, spec: MachineModelSpec, opts: BuildOptions) {
  const s = withDefaults(spec);
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: metadata(ref),
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: ref.name },
      minReplicas: s.minReplicas,
      maxReplicas: s.maxReplicas,
      metrics: [
        {
          type: 'Resource',
          resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: opts.targetCPUUtilization } },
        },
      ],
    },
  };
}

export type ChildObject =
  ReturnType<typeof buildDeployment> | ReturnType<typeof buildService> | ReturnType<typeof buildAutoscaler>;

/** Equal values, or two resource quantities of the same value written differently. */
export function sameValue(desired: unknown, live: unknown): boolean {
  return desired === live || (typeof desired === 'string' && typeof live === 'string' && sameQuantity(desired, live));
}

/**
 * True when every field of `desired` already has the same value in `live` (the server adds
 * defaults, so live is a superset). Used to skip writes when nothing differs.
 */
export function isSubset(desired: unknown, live: unknown): boolean {
  if (desired === null || typeof desired !== 'object') return sameValue(desired, live);
  if (live === null || typeof live !== 'object') return false;
  if (Array.isArray(desired)) {
    return Array.isArray(live) && desired.length === live.length && desired.every((d, i) => isSubset(d, live[i]));
  }
  return Object.entries(desired as Record<string, unknown>).every(([k, v]) =>
    isSubset(v, (live as Record<string, unknown>)[k]),
  );
}
