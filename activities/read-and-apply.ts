// A round's first two Kubernetes steps as one: read the MachineModel and, when the round can only be
// an apply of a valid spec (src/core/lifecycle.ts, appliesWithRead), apply its children. Each step a
// round saves is a workflow activation and a history event less.
import { ApplicationFailure } from '@temporalio/common';
import type { StepFailure } from '../src/core/failures.js';
import { appliesWithRead } from '../src/core/lifecycle.js';
import type { ApplyOptions, ApplyResult } from './apply-children.js';
import type { ModelSnapshot } from './read-model.js';

export interface ReadAndApplyInput extends ApplyOptions {
  key: { namespace: string; name: string };
  /** The uid of the object the workflow follows, if any: another object's round reads only. */
  followedUid?: string;
}

export interface ReadAndApplyResult {
  model: ModelSnapshot | null;
  /** The children as applied; absent when the round has more to decide first, or the apply failed. */
  applied?: ApplyResult;
  /**
   * Why the apply was refused for good (a Deployment someone else owns, a namespace being deleted):
   * the round reports it and nothing retries it, as when applyChildren fails so.
   */
  refused?: StepFailure;
}

interface Steps {
  readModel(key: { namespace: string; name: string }): Promise<ModelSnapshot | null>;
  applyChildren(model: ModelSnapshot, options?: ApplyOptions): Promise<ApplyResult>;
}

export function readAndApplyActivity(steps: Steps) {
  return async function readAndApply({ key, followedUid, promoted }: ReadAndApplyInput): Promise<ReadAndApplyResult> {
    const model = await steps.readModel(key);
    if (!model || !appliesWithRead(model, followedUid)) return { model };
    try {
      return { model, applied: await steps.applyChildren(model, promoted ? { promoted } : {}) };
    } catch (err) {
      if (err instanceof ApplicationFailure && err.nonRetryable) {
        return { model, refused: { type: err.type ?? undefined, message: err.message, nonRetryable: true } };
      }
      // Worth retrying: the round applies again as a step of its own, which retries it.
      return { model };
    }
  };
}
