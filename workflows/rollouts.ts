// The MachineModel workflow's side of canary rollouts (docs/rollouts.md): start the rollout of a new
// revision as a child workflow, cancel it when a newer revision or the model's deletion overtakes it,
// keep what it reports for status.rollout, and, as the only writer of the canary and the route, give
// the canary the size and share the running rollout asks (each round, from its current step), answer
// it, and remove the canary once its rollout ended (a promoted one once its revision is stable).
// The rollout itself, step by step, is canary-rollout.ts.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ParentClosePolicy,
  getExternalWorkflowHandle,
  isCancellation,
  deprecatePatch,
  startChild,
} from '@temporalio/workflow';
import type { ApplyResult, ModelSnapshot } from '../activities/index.js';
import type { RolloutStatus } from '../src/core/api.js';
import { canaryShare, canaryUpkeep, type CanaryWant, type RoundRollout } from '../src/core/canary-state.js';
import { revisionName, sameRevision, type Revision } from '../src/core/rollout.js';
import { judgeReport } from '../src/core/rollout-reports.js';
import { isReady } from '../src/core/status.js';
import type { CarriedState } from './definitions.js';
import type { canaryRolloutWorkflow } from './canary-rollout.js';
import type { PatchId } from './patches.js';
import {
  canaryAnsweredSignal,
  rolloutWorkflowId,
  rolloutWorkflowType,
  type RolloutReport,
  type RolloutState,
} from './rollout-definitions.js';
import { kubeStep } from './steps.js';

const rolloutKnownBeforeStart: PatchId = 'rollout-known-before-start';
const reportsBoundToRun: PatchId = 'reports-bound-to-run';

/** What the round's status says of a rollout. */
export interface RolloutFollowUp {
  changes: string[];
  status?: RolloutStatus;
  /** The spec's revision was rolled back (or aborted): the model is Failed until the spec changes. */
  failed?: string;
}

/**
 * The model's side of its rollouts, over the state its workflow carries: reports taken, rollouts
 * started, followed and cancelled, the canary's share and objects. Each method is a part of a round.
 */
export class ModelRollouts {
  constructor(
    private readonly state: Pick<CarriedState, 'rollout' | 'canaryShare'>,
    private readonly readyDeadlineSeconds: number,
  ) {}

  /**
   * A report from the rollout: kept for the next round's status; the promoted revision becomes stable.
   * True when it was taken, so a round must follow.
   */
  onReport(report: RolloutReport): boolean {
    const r = this.state.rollout;
    deprecatePatch(reportsBoundToRun);
    const verdict = judgeReport(r, report);
    if (!verdict.take) return false;
    if (verdict.bindRunId) r!.runId = verdict.bindRunId;
    this.take(r!, report);
    return true;
  }

  private take(r: RolloutState, report: RolloutReport) {
    r.view = report.view;
    if (r.running && report.want) {
      // The latest ask counts (signals come in order), answered at the end of the next round, even
      // one answered before: a rollout asks again when it missed the answer.
      r.want = report.want;
      r.answered = undefined;
    }
    if (report.result) {
      r.running = false;
      r.result = { outcome: report.result.outcome, check: report.result.check, message: report.result.message };
    }
  }

  /** The revision the stable Deployment may move to: one a rollout promoted. */
  promoted(): Revision | undefined {
    return this.state.rollout?.result?.outcome === 'Promoted' ? this.state.rollout.revision : undefined;
  }

  /** Cancels the running rollout (its canary then goes in the round); what the round says of it. */
  async cancel(why: string): Promise<string[]> {
    const r = this.state.rollout;
    if (!r?.running) return [];
    r.running = false;
    r.result = { outcome: 'Aborted', message: why };
    await getExternalWorkflowHandle(r.workflowId).cancel();
    return [`rollout of ${r.revision.image} cancelled: ${why}`];
  }

  /** After the children are applied: start, follow or end the rollout the spec asks for. */
  async follow(model: ModelSnapshot, applied: ApplyResult): Promise<RolloutFollowUp> {
    const { ref } = model;
    const pending = applied.rollout?.pending;
    const changes: string[] = [];
    if (pending && model.spec.rollout) {
      const current = this.state.rollout;
      if (!current || !sameRevision(current.revision, pending) || current.restartable) {
        changes.push(...(await this.cancel(`a newer revision, ${pending.image}, came`)));
        changes.push(await this.start(model, pending, applied));
      }
    } else if (this.state.rollout?.running) {
      // The spec went back to the stable revision, or dropped its rollout: the canary goes.
      changes.push(...(await this.cancel('the spec no longer asks for its revision')));
    }
    const r = this.state.rollout;
    if (!r) return { changes };
    const failed =
      pending && sameRevision(r.revision, pending) && !r.running && r.result?.outcome !== 'Promoted'
        ? `the rollout of ${pending.image} (${pending.modelPath}) ended ${r.result?.outcome}: ${r.result?.message}; the stable revision ${r.stable.image} serves`
        : undefined;
    return { changes, status: statusOf(r), ...(failed ? { failed } : {}) };
  }

  private async start(model: ModelSnapshot, revision: Revision, applied: ApplyResult): Promise<string> {
    const { ref } = model;
    const stable = applied.rollout!.stable;
    const workflowId = rolloutWorkflowId(ref, revisionName(revision));
    const stableReplicas = Math.max(1, applied.readiness.desiredReplicas);
    const recorded: RolloutState = {
      workflowId,
      // Known once the start returns: until then a report names the run it binds (judgeReport).
      runId: null,
      revision,
      stable,
      running: true,
      plan: model.spec.rollout!,
      stableReplicas,
    };
    // The rollout's first ask can come in the same workflow task as its start (a task that waited on a
    // busy worker), and the SDK runs that task's signal handlers before this code resumes: the report
    // must find its rollout known already, or the ask is dropped and the canary never comes.
    deprecatePatch(rolloutKnownBeforeStart);
    const before = this.state.rollout;
    this.state.rollout = recorded;
    let adopted = false;
    try {
      const child = await startChild<typeof canaryRolloutWorkflow>(rolloutWorkflowType, {
        workflowId,
        args: [
          {
            ref,
            revision,
            stable,
            plan: model.spec.rollout!,
            stableReplicas,
            readyDeadlineSeconds: this.readyDeadlineSeconds,
          },
        ],
        // The rollout outlives a continue-as-new of the model's workflow; it reports by signal.
        parentClosePolicy: ParentClosePolicy.ABANDON,
      });
      recorded.runId = child.firstExecutionRunId;
    } catch (err) {
      // This revision's rollout runs already (this workflow was reset, or lost its state): follow it.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
        this.state.rollout = before;
        throw err;
      }
      adopted = true;
    }
    return adopted
      ? `rollout of ${revision.image} running already: following it`
      : `rollout of ${revision.image} started`;
  }

  /** The running rollout as the round's canary decisions see it. */
  private running(): RoundRollout | undefined {
    const r = this.state.rollout;
    if (!r?.running || !r.plan || !r.stableReplicas) return undefined;
    return {
      revision: r.revision,
      plan: r.plan,
      stableReplicas: r.stableReplicas,
      ...(r.want ? { want: r.want } : {}),
    };
  }

  /**
   * The canary's share of the model's requests this round (canaryShare), whether the route must
   * change for it, and the ask it answers: an ask that comes later in the round is the next round's.
   */
  share(applied: ApplyResult): RoundShare {
    const rollout = this.running();
    const weight = canaryShare(rollout, applied.liveCanary);
    return {
      weight,
      changed: weight !== (this.state.canaryShare ?? 0),
      ...(rollout?.want ? { answers: rollout.want } : {}),
    };
  }

  /**
   * Once the route carries this round's share: the canary objects as the running rollout asks, or
   * removed once no rollout needs them; then the ask the share was decided for answered with it.
   */
  async keepCanary(model: ModelSnapshot, applied: ApplyResult, share: RoundShare): Promise<string[]> {
    const { ref } = model;
    const r = this.state.rollout;
    const rollout = this.running();
    const awaitingStable = r?.result?.outcome === 'Promoted' && !isReady(applied.readiness);
    const upkeep = canaryUpkeep(rollout, applied.liveCanary, awaitingStable);
    const changes: string[] = [];
    if (upkeep.do === 'apply') {
      const canary = { revision: rollout!.revision, replicas: upkeep.replicas };
      const what = `canary: ${upkeep.replicas} × ${canary.revision.image}`;
      const synced = await kubeStep('syncCanary', what, { ref, canary });
      changes.push(...synced.changes);
      // The spec moved on since this round read it: the next round, which it woke, answers.
      if (synced.refused) return changes;
    } else if (upkeep.do === 'remove') {
      changes.push(...(await kubeStep('syncCanary', 'remove the canary', { ref })).changes);
    }
    const asked = share.answers;
    if (r?.running && asked && r.answered !== asked.seq) {
      if (await answer(r.workflowId, { seq: asked.seq, weight: share.weight })) r.answered = asked.seq;
      else {
        // Gone without its result (terminated, or failed): the canary goes at the next round.
        r.running = false;
        r.result = { outcome: 'Aborted', message: 'the rollout ended without a result' };
      }
    }
    return changes;
  }

  /** On deletion: the canary goes with the model (owner references); its rollout stops. */
  async forget(): Promise<string[]> {
    return this.cancel('the model is being deleted');
  }

  /**
   * The spec turned invalid: the running rollout is cancelled, and its revision's rollout starts again
   * once the spec is valid (follow).
   */
  async withdraw(why: string): Promise<string[]> {
    const r = this.state.rollout;
    if (r?.running) r.restartable = true;
    return this.cancel(why);
  }

  /** The canary's objects removed, whatever the rollout: once its share is off the route. */
  async removeCanary(ref: ModelSnapshot['ref']): Promise<string[]> {
    const { changes } = await kubeStep('syncCanary', 'remove the canary', { ref });
    if (this.state.rollout) this.state.rollout.canaryWithdrawn = true;
    return changes;
  }
}

/** Tells the rollout what the round set; false when it is no longer running. */
async function answer(workflowId: string, answered: { seq: number; weight: number }): Promise<boolean> {
  try {
    await getExternalWorkflowHandle(workflowId).signal(canaryAnsweredSignal, answered);
    return true;
  } catch (err) {
    // The only failure of a signal to another workflow: it is no longer running.
    if (isCancellation(err)) throw err;
    return false;
  }
}

/** The canary's share a round decided, and the ask it answers. */
export interface RoundShare {
  weight: number;
  changed: boolean;
  answers?: CanaryWant;
}

function statusOf(r: RolloutState): RolloutStatus {
  const v = r.view;
  return {
    workflowId: r.workflowId,
    // A rollout that is ending says its outcome in its view; the status says it once the result came.
    phase: r.result?.outcome ?? (v?.phase === 'Paused' ? 'Paused' : 'Progressing'),
    stable: r.stable,
    canary: r.revision,
    ...(v ? { step: v.step, steps: v.steps, weight: v.weight } : {}),
    ...(v?.pauseEndsAt && !r.result ? { pauseEndsAt: v.pauseEndsAt } : {}),
    ...(r.result ? { message: r.result.message } : v?.message ? { message: v.message } : {}),
  };
}
