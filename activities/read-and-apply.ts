// A round's Kubernetes steps as one, when the round needs no decision between them: read the
// MachineModel; when the round can only be an apply of a valid spec (src/core/lifecycle.ts,
// appliesWithRead), apply its children; and when nothing lies between the apply and the status
// (reportsWithApply), write the status too. Each step a round saves is a workflow activation and a
// history event less; the result records what each part did, for the Web UI and mmctl history.
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { StepFailure } from '../src/core/failures.js';
import { appliesWithRead, reportsWithApply } from '../src/core/lifecycle.js';
import {
  progressOfRound,
  type FollowedProgress,
  type ProgressConfig,
  type ProgressDecision,
} from '../src/core/progress.js';
import { isReady, phaseOf } from '../src/core/status.js';
import { statusSummary } from '../src/core/step-summaries.js';
import type { Phase } from '../src/core/api.js';
import type { ApplyOptions, ApplyResult } from './apply-children.js';
import type { ModelSnapshot } from './read-model.js';
import type { WriteStatusInput, WriteStatusResult } from './write-status.js';

/** What the workflow would decide the status from, had the apply been a step of its own. */
export interface ReportContext {
  followed: FollowedProgress;
  /** The phase the workflow last reported, for the summary. */
  phase?: Phase;
  /** The workflow's clock when it asked (ms): progress is decided on its time, as in the workflow. */
  now: number;
  config: ProgressConfig;
}

export interface ReadAndApplyInput extends ApplyOptions {
  key: { namespace: string; name: string };
  /** The uid of the object the workflow follows, if any: another object's round reads only. */
  followedUid?: string;
  /** Given by a workflow that follows no rollout: the status may be written in this step too. */
  report?: ReportContext;
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
  /** The status, written after the apply: the progress decided, the status step's own result and summary. */
  reported?: { progress: ProgressDecision; status: WriteStatusResult; summary: string };
}

interface Steps {
  readModel(key: { namespace: string; name: string }): Promise<ModelSnapshot | null>;
  applyChildren(model: ModelSnapshot, options?: ApplyOptions): Promise<ApplyResult>;
  writeStatus(ref: ModelSnapshot['ref'], input: WriteStatusInput): Promise<WriteStatusResult>;
}

export function readAndApplyActivity(steps: Steps) {
  /** The status step, when nothing lies between it and the apply; undefined leaves it to the workflow. */
  async function report(
    model: ModelSnapshot,
    applied: ApplyResult,
    context: ReportContext,
  ): Promise<ReadAndApplyResult['reported']> {
    const { readiness } = applied;
    const seen = { uid: model.ref.uid, generation: model.generation };
    const progress = progressOfRound(context.followed, seen, isReady(readiness), context.now, context.config);
    if (!reportsWithApply(model, applied, progress.verdict)) return undefined;
    const input: WriteStatusInput = {
      generation: model.generation,
      verdict: progress.verdict,
      readiness,
      inferenceURL: applied.inferenceURL,
      selector: applied.selector,
      extraConditions: [],
    };
    // A failed write is the workflow's own status step to retry, with its policy and its attempts shown.
    const status = await steps.writeStatus(model.ref, input).catch(() => undefined);
    if (!status) return undefined;
    const summary = statusSummary(context.phase, phaseOf(progress.verdict, readiness), readiness, applied.changes);
    return { progress, status, summary };
  }

  return async function readAndApply({
    key,
    followedUid,
    promoted,
    report: context,
  }: ReadAndApplyInput): Promise<ReadAndApplyResult> {
    const model = await steps.readModel(key);
    if (!model || !appliesWithRead(model, followedUid)) return { model };
    let applied: ApplyResult;
    try {
      applied = await steps.applyChildren(model, promoted ? { promoted } : {});
    } catch (err) {
      if (err instanceof CancelledFailure) throw err;
      if (err instanceof ApplicationFailure && err.nonRetryable) {
        return { model, refused: { type: err.type ?? undefined, message: err.message, nonRetryable: true } };
      }
      // Worth retrying: the round applies again as a step of its own, which retries it.
      return { model };
    }
    const reported = context ? await report(model, applied, context) : undefined;
    return { model, applied, ...(reported ? { reported } : {}) };
  };
}
