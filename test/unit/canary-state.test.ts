import { describe, expect, it } from 'vitest';
import {
  buildCanaryDeployment,
  buildCanaryService,
  canaryShare,
  canaryUpkeep,
  deploymentAsBuilt,
  foreignRunFields,
  liveCanaryOf,
  serviceAsBuilt,
} from '../../src/core/canary-state.js';
import { buildDeployment, buildService, defaultBuildOptions } from '../../src/core/desired-state.js';
import { revisionName } from '../../src/core/rollout.js';

const ref = { namespace: 'ml', name: 'classifier', uid: 'u-1' };
const spec = {
  image: 'reg/classifier:v1',
  modelPath: '/models/v1',
  resources: { cpu: '500m', memory: '1Gi' },
  minReplicas: 2,
  maxReplicas: 6,
};
const next = { image: 'reg/classifier:v2', modelPath: '/models/v2' };

describe("a canary's children", () => {
  const deployment = buildCanaryDeployment(ref, spec, next, 1, defaultBuildOptions);
  const stable = buildDeployment(ref, spec, defaultBuildOptions);

  it('run the new revision, at the size asked, owned by the model, under a name of their own', () => {
    expect(deployment.metadata.name).toBe('classifier-canary');
    expect(deployment.metadata.ownerReferences).toEqual(stable.metadata.ownerReferences);
    expect(deployment.spec.replicas).toBe(1);
    const container = deployment.spec.template.spec.containers[0]!;
    expect(container.image).toBe('reg/classifier:v2');
    expect(container.env).toContainEqual({ name: 'MODEL_PATH', value: '/models/v2' });
    // The model server answers under the model's name, canary or not.
    expect(container.env).toContainEqual({ name: 'MODEL_NAME', value: 'classifier' });
    expect(container.resources).toEqual(stable.spec.template.spec.containers[0]!.resources);
  });

  it('are never selected by the stable Deployment or Service, and say whose canary they are and of which revision', () => {
    const podLabels = deployment.spec.template.metadata.labels;
    const selects = (selector: Record<string, string>) =>
      Object.entries(selector).every(([k, v]) => podLabels[k] === v);
    expect(selects(stable.spec.selector.matchLabels)).toBe(false);
    expect(selects(buildService(ref, spec).spec.selector)).toBe(false);
    expect(selects(deployment.spec.selector.matchLabels)).toBe(true);
    expect(podLabels).toMatchObject({
      'stable.example.com/canary-of': 'classifier',
      'stable.example.com/revision': revisionName(next),
      'app.kubernetes.io/managed-by': 'machinemodel-operator',
    });
    const service = buildCanaryService(ref, spec, next);
    expect(service.metadata.name).toBe('classifier-canary');
    expect(selects(service.spec.selector)).toBe(true);
    expect(service.spec.ports).toEqual(buildService(ref, spec).spec.ports);
  });
});

describe('a canary as its revision builds it', () => {
  const built = buildCanaryDeployment(ref, spec, next, 1, defaultBuildOptions);
  /** The live object: what was applied, with what the apiserver adds. */
  const live = (edit: (d: any) => void = () => {}) => {
    const d = structuredClone(built) as any;
    d.metadata.uid = 'u-canary';
    d.spec.template.spec.restartPolicy = 'Always';
    d.spec.template.spec.containers[0].terminationMessagePath = '/dev/termination-log';
    edit(d);
    return d;
  };

  it('is as built with what the apiserver adds', () => {
    expect(deploymentAsBuilt(built, live())).toBe(true);
    expect(foreignRunFields(built, live())).toEqual([]);
  });

  it('is not with another image, nor with what changes what runs added beside the fields it sets', () => {
    expect(
      deploymentAsBuilt(
        built,
        live((d) => (d.spec.template.spec.containers[0].image = 'miner:1')),
      ),
    ).toBe(false);
    const commanded = live((d) => (d.spec.template.spec.containers[0].command = ['sh', '-c', 'mine']));
    expect(foreignRunFields(built, commanded)).toEqual(['model.command']);
    expect(deploymentAsBuilt(built, commanded)).toBe(false);
    const mounted = live((d) => {
      d.spec.template.spec.volumes = [{ name: 'x', emptyDir: {} }];
      d.spec.template.spec.initContainers = [{ name: 'init', image: 'miner:1' }];
    });
    expect(foreignRunFields(built, mounted)).toEqual(['initContainers', 'volumes']);
    expect(
      deploymentAsBuilt(
        built,
        live((d) => d.spec.template.spec.containers[0].env.push({ name: 'X', value: '1' })),
      ),
    ).toBe(false);
  });

  it("has a Service that selects the canary's Pods alone", () => {
    const service = buildCanaryService(ref, spec, next);
    const liveService = (selector: Record<string, string>) => ({
      ...structuredClone(service),
      spec: { ...structuredClone(service.spec), clusterIP: '10.0.0.9', selector },
    });
    expect(serviceAsBuilt(service, liveService(service.spec.selector))).toBe(true);
    expect(serviceAsBuilt(service, liveService({ ...service.spec.selector, mine: 'yes' }))).toBe(false);
  });
});

describe("the model round's canary decisions", () => {
  const plan = { strategy: 'Canary' as const, steps: [{ weight: 10 }, { weight: 50 }] };
  const rollout = (want?: { step: number; replicas: number; weight: number }) => ({
    revision: next,
    plan,
    stableReplicas: 4,
    ...(want ? { want: { ...want, seq: 1 } } : {}),
  });
  const live = (readyReplicas: number, replicas = 2, revision = revisionName(next)) => ({
    revision,
    replicas,
    readyReplicas,
  });

  it('gives the asked share only to a canary of its revision whose ready replicas carry it, never above the step', () => {
    expect(canaryShare(rollout({ step: 1, replicas: 2, weight: 50 }), live(2))).toBe(50);
    // 50 % of 4 stable replicas needs 2 ready.
    expect(canaryShare(rollout({ step: 1, replicas: 2, weight: 50 }), live(1))).toBe(0);
    // An ask above its step's weight is cut to it.
    expect(canaryShare(rollout({ step: 0, replicas: 1, weight: 50 }), live(2))).toBe(10);
    // The last revision's canary, not yet relabelled: none.
    expect(canaryShare(rollout({ step: 1, replicas: 2, weight: 50 }), live(2, 2, 'other'))).toBe(0);
    expect(canaryShare(rollout(), live(2))).toBe(0);
    expect(canaryShare(undefined, live(2))).toBe(0);
  });

  it('applies the asked canary, keeps a promoted one until the stable revision runs, removes it otherwise', () => {
    expect(canaryUpkeep(rollout({ step: 0, replicas: 1, weight: 0 }), undefined, false)).toEqual({
      do: 'apply',
      replicas: 1,
    });
    expect(canaryUpkeep(rollout({ step: 1, replicas: 2, weight: 0 }), live(1, 1), false)).toEqual({
      do: 'apply',
      replicas: 2,
    });
    expect(canaryUpkeep(rollout({ step: 1, replicas: 2, weight: 0 }), live(2), false)).toEqual({ do: 'keep' });
    expect(canaryUpkeep(rollout(), live(2, 2, 'other'), false)).toEqual({ do: 'keep' });
    expect(canaryUpkeep(undefined, live(2), true)).toEqual({ do: 'keep' });
    expect(canaryUpkeep(undefined, live(2), false)).toEqual({ do: 'remove' });
    expect(canaryUpkeep(undefined, undefined, false)).toEqual({ do: 'keep' });
  });

  it('gives no share to a canary edited in place with its labels and size kept, and applies it again', () => {
    const built = { metadata: { generation: 1, labels: { 'stable.example.com/revision': revisionName(next) } } };
    const d = {
      ...built,
      spec: { replicas: 2 },
      status: { observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 2 },
    };
    const edited = liveCanaryOf(d, false);
    expect(edited).toEqual({ revision: revisionName(next), replicas: 2, readyReplicas: 0, edited: true });
    expect(canaryShare(rollout({ step: 1, replicas: 2, weight: 50 }), edited)).toBe(0);
    expect(canaryUpkeep(rollout({ step: 1, replicas: 2, weight: 50 }), edited, false)).toEqual({
      do: 'apply',
      replicas: 2,
    });
    expect(canaryShare(rollout({ step: 1, replicas: 2, weight: 50 }), liveCanaryOf(d))).toBe(50);
  });

  it("counts no ready replica of a canary whose Pods do not all run its template yet (bug 2: a new revision took the last one's share)", () => {
    const relabelled = (status: object, generation = 2) => ({
      metadata: { generation, labels: { 'stable.example.com/revision': revisionName(next) } },
      spec: { replicas: 1 },
      status,
    });
    // The last revision's Pod still ready, the new one's not yet: none of this revision's is.
    expect(
      liveCanaryOf(relabelled({ observedGeneration: 2, replicas: 2, updatedReplicas: 1, readyReplicas: 1 })),
    ).toEqual({ revision: revisionName(next), replicas: 1, readyReplicas: 0 });
    // The controller has not seen the relabel yet.
    expect(
      liveCanaryOf(relabelled({ observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1 })),
    ).toMatchObject({
      readyReplicas: 0,
    });
    expect(
      liveCanaryOf(relabelled({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1 })),
    ).toMatchObject({
      readyReplicas: 1,
    });
  });
});
