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

type Labels = Record<string, string> | undefined;

/**
 * Whether a live canary object (by its labels) is `revision`'s canary; any revision's when none is
 * named (the model's own round removes whatever canary outlived its rollout). A cancelled rollout
 * names its revision, so its late cleanup never touches the canary of the revision that overtook it.
 */
export const isCanaryOf = (labels: Labels, revision: Revision | undefined): boolean =>
  !revision || labels?.[revisionLabel] === revisionName(revision);

/**
 * Whether applying `revision`'s canary over the live canary Service (its labels; undefined: none)
 * takes the earlier revision's share away first: a new revision starts at no share, unjudged.
 */
export const resetsShare = (liveLabels: Labels | null, revision: Revision): boolean =>
  liveLabels !== null && liveLabels?.[revisionLabel] !== revisionName(revision);
