import { describe, expect, it } from 'vitest';
import { buildCanaryDeployment, buildCanaryService } from '../../src/core/canary-state.js';
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
