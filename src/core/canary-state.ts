// A canary's Deployment and Service: the model's own, for another revision, under another name. Pure.
//
// The canary is an instance of its own (`<name>-canary`), so the stable Deployment's selector, its
// Service and its autoscaler never count or reach the canary's Pods, and adding a rollout to a model
// changes nothing of what runs until a new revision comes.
import { canaryOfLabel, revisionLabel, type MachineModelSpec, type ModelRef } from './api.js';
import { buildDeployment, buildService, childLabels, selectorLabels, type BuildOptions } from './desired-state.js';
import { revisionName, type Revision } from './rollout.js';

export const canaryName = (model: string) => `${model}-canary`;

function canaryLabels(model: string, revision: Revision): Record<string, string> {
  return { ...childLabels(canaryName(model)), [canaryOfLabel]: model, [revisionLabel]: revisionName(revision) };
}

export function buildCanaryDeployment(
  ref: ModelRef,
  spec: MachineModelSpec,
  revision: Revision,
  replicas: number,
  opts: BuildOptions,
) {
  const d = buildDeployment(ref, { ...spec, ...revision, replicas }, opts);
  const labels = canaryLabels(ref.name, revision);
  return {
    ...d,
    metadata: { ...d.metadata, name: canaryName(ref.name), labels },
    spec: {
      ...d.spec,
      selector: { matchLabels: selectorLabels(canaryName(ref.name)) },
      template: { ...d.spec.template, metadata: { labels } },
    },
  };
}

export function buildCanaryService(ref: ModelRef, spec: MachineModelSpec, revision: Revision) {
  const s = buildService(ref, spec);
  return {
    ...s,
    metadata: { ...s.metadata, name: canaryName(ref.name), labels: canaryLabels(ref.name, revision) },
    spec: { ...s.spec, selector: selectorLabels(canaryName(ref.name)) },
  };
}
