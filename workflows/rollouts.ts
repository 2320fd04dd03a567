// The MachineModel workflow's side of canary rollouts (docs/rollouts.md): start the rollout of a new
// revision as a child workflow, cancel it when a newer revision or the model's deletion overtakes it,
// keep what it reports for status.rollout, and remove the canary once a promoted revision is stable.
// The rollout itself, step by step, is canary-rollout.ts.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { ParentClosePolicy, getExternalWorkflowHandle, patched, startChild } from '@temporalio/workflow';
import type { ApplyResult, ModelSnapshot } from '../activities/index.js';
import type { RolloutStatus } from '../src/core/api.js';
import { revisionName, sameRevision, type Revision } from '../src/core/rollout.js';
import { isReady } from '../src/core/status.js';
import type { CarriedState } from './definitions.js';
import type { canaryRolloutWorkflow } from './canary-rollout.js';
import type { PatchId } from './patches.js';
import {
  rolloutWorkflowId,
  rolloutWorkflowType,
  type RolloutResult,
  type RolloutState,
  type RolloutView,
} from './rollout-definitions.js';
import { localFirst as kubeStep } from './steps.js';

const canaryRollouts: PatchId = 'canary-rollouts';

/** What the round's status says of a rollout. */
export interface RolloutFollowUp {
  changes: string[];
  status?: RolloutStatus;
  /** The spec's revision was rolled back (or aborted): the model is Failed until the spec changes. */
  failed?: string;
}

export function rolloutSteps(state: Pick<CarriedState, 'rollout'>, readyDeadlineSeconds: number) {
  /** A report from the rollout: kept for the next round's status; the promoted revision becomes stable. */
  function onReport(report: { view: RolloutView; result?: RolloutResult }) {
    const r = state.rollout;
    if (!r || !sameRevision(r.revision, report.view.revision)) return;
    r.view = report.view;
    if (report.result) {
      r.running = false;
      r.result = { outcome: report.result.outcome, check: report.result.check, message: report.result.message };
    }
  }

  /** The revision the stable Deployment may move to: one a rollout promoted. */
  const promoted = (): Revision | undefined =>
    state.rollout?.result?.outcome === 'Promoted' ? state.rollout.revision : undefined;

  async function cancelRunning(why: string): Promise<string[]> {
    const r = state.rollout;
    if (!r?.running) return [];
    r.running = false;
    r.result = { outcome: 'Aborted', message: why };
    await getExternalWorkflowHandle(r.workflowId).cancel();
    return [`rollout of ${r.revision.image} cancelled: ${why}`];
  }

  /** After the children are applied: start, follow or end the rollout the spec asks for. */
  async function follow(model: ModelSnapshot, applied: ApplyResult): Promise<RolloutFollowUp> {
    const { ref } = model;
    const pending = applied.rollout?.pending;
    const changes: string[] = [];
    if (pending && model.spec.rollout && patched(canaryRollouts)) {
      const current = state.rollout;
      if (!current || !sameRevision(current.revision, pending)) {
        changes.push(...(await cancelRunning(`a newer revision, ${pending.image}, came`)));
        changes.push(await start(model, pending, applied));
      }
    } else if (state.rollout?.running) {
      // The spec went back to the stable revision, or dropped its rollout: the canary goes.
      changes.push(...(await cancelRunning('the spec no longer asks for its revision')));
    }
    if (!state.rollout?.running && applied.canary && isReady(applied.readiness) && !pending) {
      // A promoted revision is stable and ready (or the rollout ended): the canary takes no more traffic.
      await kubeStep('setCanaryWeight', 'send all requests to the stable revision', { ref, weight: 0 });
      await kubeStep('removeCanary', 'remove the canary', { ref });
      changes.push('canary removed');
    }
    const r = state.rollout;
    if (!r) return { changes };
    const failed =
      pending && sameRevision(r.revision, pending) && !r.running && r.result?.outcome !== 'Promoted'
        ? `the rollout of ${pending.image} (${pending.modelPath}) ended ${r.result?.outcome}: ${r.result?.message}; the stable revision ${r.stable.image} serves`
        : undefined;
    return { changes, status: statusOf(r), ...(failed ? { failed } : {}) };
  }

  async function start(model: ModelSnapshot, revision: Revision, applied: ApplyResult): Promise<string> {
    const { ref } = model;
    const stable = applied.rollout!.stable;
    const workflowId = rolloutWorkflowId(ref, revisionName(revision));
    let adopted = false;
    try {
      await startChild<typeof canaryRolloutWorkflow>(rolloutWorkflowType, {
        workflowId,
        args: [
          {
            ref,
            revision,
            stable,
            plan: model.spec.rollout!,
            stableReplicas: Math.max(1, applied.readiness.desiredReplicas),
            readyDeadlineSeconds,
          },
        ],
        // The rollout outlives a continue-as-new of the model's workflow; it reports by signal.
        parentClosePolicy: ParentClosePolicy.ABANDON,
      });
    } catch (err) {
      // This revision's rollout runs already (this workflow was reset, or lost its state): follow it.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      adopted = true;
    }
    state.rollout = { workflowId, revision, stable, running: true };
    return adopted
      ? `rollout of ${revision.image} running already: following it`
      : `rollout of ${revision.image} started`;
  }

  /** On deletion: the canary goes with the model (owner references); its rollout stops. */
  async function forget(): Promise<string[]> {
    return cancelRunning('the model is being deleted');
  }

  return { onReport, promoted, follow, forget };
}

function statusOf(r: RolloutState): RolloutStatus {
  const v = r.view;
  return {
    workflowId: r.workflowId,
    phase: r.result?.outcome ?? v?.phase ?? 'Progressing',
    stable: r.stable,
    canary: r.revision,
    ...(v ? { step: v.step, steps: v.steps, weight: v.weight } : {}),
    ...(v?.pauseEndsAt && !r.result ? { pauseEndsAt: v.pauseEndsAt } : {}),
    ...(r.result ? { message: r.result.message } : v?.message ? { message: v.message } : {}),
  };
}
