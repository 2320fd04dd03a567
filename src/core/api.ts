// The MachineModel API and the operator's fixed names. Workflow-safe: no Node.js imports.

export const group = 'stable.example.com';
export const version = 'v1';
export const apiVersion = `${group}/${version}`;
export const kind = 'MachineModel';
export const plural = 'machinemodels';

export const finalizerName = `${group}/cleanup`;
export const resyncAnnotation = `${group}/resync`;
/** On a Gateway API HTTPRoute: the route id (namespace, name and uid of its MachineModel). */
export const routeIdAnnotation = `${group}/route-id`;
export const fieldManager = 'machinemodel-operator';
/** On a canary's Deployment, Service and Pods: the model it is the canary of, and its revision (docs/rollouts.md). */
export const canaryOfLabel = `${group}/canary-of`;
export const revisionLabel = `${group}/revision`;

export const labels = {
  name: 'app.kubernetes.io/name',
  instance: 'app.kubernetes.io/instance',
  managedBy: 'app.kubernetes.io/managed-by',
} as const;
export const labelValues = { name: 'machinemodel', managedBy: 'machinemodel-operator' } as const;
/** Selects every child the operator manages, for the informer's label selector. */
export const childSelector = `${labels.managedBy}=${labelValues.managedBy}`;

export type EndpointType = 'REST' | 'gRPC';
export type Phase = 'Pending' | 'Deploying' | 'Ready' | 'Failed' | 'Deleting';

export interface MachineModelSpec {
  image: string;
  /** A path inside the image where the weights are baked in; or, instead, storageUri. */
  modelPath?: string;
  /**
   * Where the weights are stored (docs/model-storage.md): s3://bucket/key, https://…, or
   * pvc://claim/path. Fetched once per node into a cache the model's Pods mount; one of this or modelPath.
   */
  storageUri?: string;
  /** The artifact's expected SHA-256 (hex): a fetched artifact that differs is never served. */
  sha256?: string;
  /** A Secret in the model's namespace with the store's endpoint, region and credentials (AWS_* keys). */
  storageSecret?: string;
  /** Quantities as in a Pod: a string ("500m", "4Gi") or a whole number. */
  resources: { cpu: string | number; memory: string | number; gpu?: number };
  minReplicas?: number;
  maxReplicas?: number;
  /**
   * A fixed size, what `kubectl scale` sets: exactly this many replicas and no autoscaler. The bounds
   * stay as written and apply again once it is removed.
   */
  replicas?: number;
  endpointType?: EndpointType;
  /** Publication on the API gateway; on by default when the operator has a gateway configured. */
  gateway?: { enabled?: boolean; pathPrefix?: string; hostnames?: string[] };
  /** How a new image or modelPath reaches users: a canary in steps (docs/rollouts.md); a rolling update without it. */
  rollout?: RolloutSpec;
}

// A rollout's plan (docs/rollouts.md); src/core/rollout.ts decides with it.
export interface RolloutStep {
  /** Percent of the model's requests the canary serves during this step, 1 to 99. */
  weight: number;
  /** How long the step lasts before the next ("30s", "5m", "1h30m"); none: the next step follows once the canary is judged. */
  pause?: string;
}

export interface RolloutAnalysis {
  /** The canary fails when more than this percent of its requests in a step are answered 5xx. */
  maxErrorRatePercent?: number;
  /** Below this many canary requests in a step, the error rate is not judged and the rollout pauses for a person. */
  minRequests?: number;
}

export type OnFailure = 'Rollback' | 'Pause';

export interface RolloutSpec {
  strategy: 'Canary';
  steps: RolloutStep[];
  analysis?: RolloutAnalysis;
  /** What a failed check does: send all traffic back to the stable revision and remove the canary (default), or hold for a person. */
  onFailure?: OnFailure;
}

/** What status.rollout shows of the last rollout (the canary workflow's view, kept by the model's workflow). */
export interface RolloutStatus {
  /** The rollout's workflow, for mmctl rollout and the Web UI. */
  workflowId: string;
  phase: 'Progressing' | 'Paused' | 'Promoted' | 'RolledBack' | 'Aborted';
  stable: { image: string; modelPath: string };
  canary: { image: string; modelPath: string };
  step?: number;
  steps?: number;
  weight?: number;
  /** When the running step's pause ends (ISO time, as of the rollout's last step). */
  pauseEndsAt?: string;
  message?: string;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface MachineModelStatus {
  phase?: Phase;
  inferenceURL?: string;
  /** Where the gateway publishes the model, once GatewayRegistered. */
  gatewayURL?: string;
  replicas?: number;
  /** Ready replicas of the desired, "2/2": kubectl's READY column. */
  ready?: string;
  selector?: string;
  observedGeneration?: number;
  conditions?: Condition[];
  rollout?: RolloutStatus;
}

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface MachineModel {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: MachineModelSpec;
  status?: MachineModelStatus;
}

/** Identifies one object of a name: a new object of the same name has a new uid. */
export interface ModelRef {
  namespace: string;
  name: string;
  uid: string;
}

/** Whether an ownerReference is the controller reference of a MachineModel (any uid). */
export function isModelController(o: { apiVersion: string; kind: string; controller?: boolean }): boolean {
  return !!o.controller && o.kind === kind && o.apiVersion.startsWith(`${group}/`);
}

const workflowIdPrefix = 'machinemodel/';

export function workflowIdFor(namespace: string, name: string): string {
  return `${workflowIdPrefix}${namespace}/${name}`;
}

/** "namespace/name" of a model's workflow id; undefined for any other workflow (the gateway janitor). */
export function modelOfWorkflowId(workflowId: string): string | undefined {
  return workflowId.startsWith(workflowIdPrefix) ? workflowId.slice(workflowIdPrefix.length) : undefined;
}
