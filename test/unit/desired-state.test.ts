import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  buildAutoscaler,
  buildDeployment,
  buildService,
  defaultBuildOptions,
  inferenceURL,
  isSubset,
  wantsAutoscaler,
} from '../../src/core/desired-state.js';
import { ownershipOf } from '../../src/core/ownership.js';
import { buildCanaryDeployment } from '../../src/core/canary-state.js';
import { seedExample } from '../support/models.js';

const ref = { namespace: 'ml', name: 'image-classifier-v1', uid: 'uid-1' };
const spec = seedExample.spec;

describe('desired state of the seed example', () => {
  const d = buildDeployment(ref, spec, defaultBuildOptions);
  const c = d.spec.template.spec.containers[0]!;

  it("passes the restricted Pod Security Standard and mounts no ServiceAccount token (the canary's too)", () => {
    for (const pod of [
      d.spec.template.spec,
      buildCanaryDeployment(ref, spec, { image: 'r/m:2', modelPath: '/m' }, 1, defaultBuildOptions).spec.template.spec,
    ]) {
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      expect(pod.containers[0]!.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
    }
  });

  it('labels and owns every child', () => {
    for (const obj of [d, buildService(ref, spec), buildAutoscaler(ref, spec, defaultBuildOptions)]) {
      expect(obj.metadata.labels).toEqual({
        'app.kubernetes.io/name': 'machinemodel',
        'app.kubernetes.io/instance': 'image-classifier-v1',
        'app.kubernetes.io/managed-by': 'machinemodel-operator',
      });
      expect(obj.metadata.ownerReferences).toEqual([
        {
          apiVersion: 'stable.example.com/v1',
          kind: 'MachineModel',
          name: ref.name,
          uid: 'uid-1',
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
  });

  it('runs the image with the model path, requests and limits, and the GPU as an extended resource', () => {
    expect(c.image).toBe('my-registry/image-classifier:v1.2.0');
    expect(c.env).toContainEqual({ name: 'MODEL_PATH', value: '/techblog/en/app/models/image_classifier.pb' });
    expect(c.resources.requests).toEqual({ cpu: '500m', memory: '1Gi', 'nvidia.com/gpu': '1' });
    expect(c.resources.limits).toEqual({ cpu: '500m', memory: '1Gi', 'nvidia.com/gpu': '1' });
    expect(c.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
    expect(c.readinessProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'http' } });
  });

  it('writes whole-number quantities as the strings a Pod carries', () => {
    const d = buildDeployment(ref, { ...spec, resources: { cpu: 2, memory: 1073741824 } }, defaultBuildOptions);
    expect(d.spec.template.spec.containers[0]!.resources.limits).toEqual({ cpu: '2', memory: '1073741824' });
  });

  it('takes a quantity the apiserver wrote in its canonical form for the one asked for', () => {
    const resources = (cpu: string, memory: string) => ({ resources: { limits: { cpu, memory } } });
    expect(isSubset(resources('0.5', '1024Mi'), resources('500m', '1Gi'))).toBe(true);
    expect(isSubset(resources('2000', '1e3'), resources('2k', '1k'))).toBe(true);
    expect(isSubset(resources('0.5', '1Gi'), resources('501m', '1Gi'))).toBe(false);
    expect(isSubset({ image: 'x:1' }, { image: 'x:1.0' })).toBe(false);
  });

  it('uses the configured GPU resource name and leaves GPUs out when none are asked for', () => {
    const amd = buildDeployment(ref, spec, { ...defaultBuildOptions, gpuResourceName: 'amd.com/gpu' });
    expect(amd.spec.template.spec.containers[0]!.resources.limits).toHaveProperty('amd.com/gpu', '1');
    const cpuOnly = buildDeployment(ref, { ...spec, resources: { cpu: '1', memory: '1Gi' } }, defaultBuildOptions);
    expect(Object.keys(cpuOnly.spec.template.spec.containers[0]!.resources.limits)).toEqual(['cpu', 'memory']);
  });

  it('exposes gRPC on a grpc port with appProtocol and a gRPC probe', () => {
    const grpc = { ...spec, endpointType: 'gRPC' as const };
    expect(buildService(ref, grpc).spec.ports).toEqual([
      { name: 'grpc', port: 9000, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' },
    ]);
    expect(
      buildDeployment(ref, grpc, defaultBuildOptions).spec.template.spec.containers[0]!.readinessProbe,
    ).toMatchObject({ grpc: { port: 9000 } });
    expect(inferenceURL(ref, grpc, defaultBuildOptions)).toBe('grpc://image-classifier-v1.ml.svc.cluster.local:9000');
  });
});

describe('replicas and the autoscaler', () => {
  it('runs a fixed size (spec.replicas) as asked, without an HPA, whatever the bounds say', () => {
    const fixed = { ...spec, minReplicas: 2, maxReplicas: 5, replicas: 3 };
    expect(wantsAutoscaler(fixed)).toBe(false);
    expect(buildDeployment(ref, fixed, defaultBuildOptions, 5).spec.replicas).toBe(3);
    expect(buildDeployment(ref, { ...fixed, replicas: 7 }, defaultBuildOptions).spec.replicas).toBe(7);
  });

  it('wants an HPA only when maxReplicas > minReplicas', () => {
    expect(wantsAutoscaler({ ...spec, minReplicas: 2, maxReplicas: 5 })).toBe(true);
    expect(wantsAutoscaler({ ...spec, minReplicas: 3, maxReplicas: 3 })).toBe(false);
    expect(wantsAutoscaler({ ...spec, minReplicas: undefined, maxReplicas: undefined })).toBe(false);
  });

  it("owns replicas without an HPA, and keeps the HPA's choice (clamped to the bounds) with one", () => {
    expect(
      buildDeployment(ref, { ...spec, minReplicas: 3, maxReplicas: 3 }, defaultBuildOptions, 0).spec.replicas,
    ).toBe(3);
    expect(buildDeployment(ref, spec, defaultBuildOptions, 4).spec.replicas).toBe(4);
    expect(buildDeployment(ref, spec, defaultBuildOptions, 9).spec.replicas).toBe(5);
    expect(buildDeployment(ref, spec, defaultBuildOptions, 1).spec.replicas).toBe(2);
    expect(buildDeployment(ref, spec, defaultBuildOptions).spec.replicas).toBe(2);
  });

  it("targets the Deployment from the HPA with the model's bounds", () => {
    expect(buildAutoscaler(ref, spec, defaultBuildOptions).spec).toMatchObject({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: ref.name },
      minReplicas: 2,
      maxReplicas: 5,
    });
  });
});

describe('isSubset (skip writes when nothing differs)', () => {
  it('ignores fields the server added and notices changed ones', () => {
    const desired = { spec: { replicas: 2, template: { containers: [{ name: 'a', image: 'x' }] } } };
    const live = {
      metadata: { uid: 'u' },
      spec: {
        replicas: 2,
        strategy: {},
        template: { containers: [{ name: 'a', image: 'x', imagePullPolicy: 'IfNotPresent' }] },
      },
    };
    expect(isSubset(desired, live)).toBe(true);
    expect(isSubset(desired, { ...live, spec: { ...live.spec, replicas: 0 } })).toBe(false);
    expect(isSubset(desired, { spec: { replicas: 2, template: { containers: [] } } })).toBe(false);
  });
});

describe('ownershipOf', () => {
  const owned = (uid: string, name = ref.name, kind = 'MachineModel') => ({
    metadata: { ownerReferences: [{ apiVersion: 'stable.example.com/v1', kind, name, uid, controller: true }] },
  });
  it("tells ours, a deleted predecessor's, and someone else's apart", () => {
    expect(ownershipOf(undefined, ref)).toBe('absent');
    expect(ownershipOf(owned('uid-1'), ref)).toBe('ours');
    expect(ownershipOf(owned('uid-0'), ref)).toBe('previous');
    expect(ownershipOf(owned('uid-9', 'other'), ref)).toBe('foreign');
    expect(ownershipOf(owned('uid-9', ref.name, 'ReplicaSet'), ref)).toBe('foreign');
    expect(ownershipOf({ metadata: {} }, ref)).toBe('foreign');
  });
});

describe('desired state of a model in storage', () => {
  const sum = 'cd'.repeat(32);
  const stored = { ...spec, modelPath: undefined, storageUri: 's3://models/digits/v1/digits.joblib', sha256: sum };

  it("mounts the artifact as a read-only volume of the model cache's CSI driver: no init container, no hostPath, no root", () => {
    const pod = buildDeployment(ref, { ...stored, storageSecret: 'store' }, defaultBuildOptions).spec.template.spec;
    expect(pod.volumes).toEqual([
      {
        name: 'model-cache',
        csi: {
          driver: 'model-cache.stable.example.com',
          readOnly: true,
          volumeAttributes: { uri: 's3://models/digits/v1/digits.joblib', sha256: sum },
          // The kubelet reads the Secret and hands it to the node's plugin: the operator never does.
          nodePublishSecretRef: { name: 'store' },
        },
      },
    ]);
    expect(pod).not.toHaveProperty('initContainers');
    expect(JSON.stringify(pod)).not.toContain('hostPath');
    expect(JSON.stringify(pod)).not.toContain('runAsUser');
    expect(pod.securityContext).toEqual({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    const model = pod.containers[0]!;
    expect(JSON.stringify(model)).not.toContain('store');
    expect(model.env).toContainEqual({ name: 'MODEL_PATH', value: '/mnt/models/digits.joblib' });
    expect(model.env).toContainEqual({ name: 'STORAGE_URI', value: 's3://models/digits/v1/digits.joblib' });
    expect(model.env).toContainEqual({
      name: 'MODEL_SOURCE',
      value: `s3://models/digits/v1/digits.joblib@sha256:${sum}`,
    });
    expect(model.volumeMounts).toEqual([{ name: 'model-cache', mountPath: '/mnt/models', readOnly: true }]);
  });

  it('asks anonymously without a storageSecret, and leaves the sum out without one', () => {
    const pod = buildDeployment(ref, { ...stored, sha256: undefined }, defaultBuildOptions).spec.template.spec;
    expect(pod.volumes![0]).toEqual({
      name: 'model-cache',
      csi: {
        driver: 'model-cache.stable.example.com',
        readOnly: true,
        volumeAttributes: { uri: 's3://models/digits/v1/digits.joblib' },
      },
    });
  });

  it('mounts a pvc:// claim as it is, with nothing to fetch', () => {
    const pod = buildDeployment(
      ref,
      { ...spec, modelPath: undefined, storageUri: 'pvc://weights/team/digits.joblib' },
      defaultBuildOptions,
    ).spec.template.spec;
    expect(pod).not.toHaveProperty('initContainers');
    expect(pod.volumes).toEqual([
      { name: 'model-cache', persistentVolumeClaim: { claimName: 'weights', readOnly: true } },
    ]);
    expect(pod.containers[0]!.env).toContainEqual({ name: 'MODEL_PATH', value: '/mnt/models/team/digits.joblib' });
  });

  it("builds a rollout's stable and canary from their own revisions' storage", () => {
    const canary = buildCanaryDeployment(
      ref,
      stored,
      { image: 'r/m:2', modelPath: 's3://models/digits/v2/digits.joblib' },
      1,
      defaultBuildOptions,
    );
    expect(canary.spec.template.spec.volumes![0]).toMatchObject({
      csi: { volumeAttributes: { uri: 's3://models/digits/v2/digits.joblib' } },
    });
    expect(canary.spec.template.spec.containers[0]!.env).toContainEqual({
      name: 'MODEL_SOURCE',
      value: 's3://models/digits/v2/digits.joblib',
    });
  });

  it('builds a baked-in model exactly as before: no volumes, no init container', () => {
    const pod = buildDeployment(ref, spec, defaultBuildOptions).spec.template.spec;
    expect(pod).not.toHaveProperty('volumes');
    expect(pod).not.toHaveProperty('initContainers');
    expect(pod.containers[0]!.env[0]).toEqual({ name: 'MODEL_PATH', value: spec.modelPath });
  });
});
