// One round of a MachineModel's reconcile, as its workflow runs it: read the object, then apply or
// clean up as the finalizer table says (src/core/lifecycle.ts). The loop around it (machine-model.ts:
// signals, waits, continue-as-new) is kube-rs's Controller; this is its `reconcile`. Orchestration
// only: every read and write is a step (an activity), every decision a pure function (src/core/).
import { patched, upsertMemo, workflowInfo } from '@temporalio/workflow';
import type { ModelSnapshot, ReadAndApplyResult, ReportContext, WriteStatusInput } from '../activities/index.js';
import type { ModelRef } from '../src/core/api.js';
import { errorPolicy, requeueSeconds, type FailureType, type StepFailure } from '../src/core/failures.js';
import { lifecycleOf } from '../src/core/lifecycle.js';
import { decideProgress, progressOnSight } from '../src/core/progress.js';
import type { WorkflowConfig } from '../src/core/reconcile-timing.js';
import { isReady, type Verdict } from '../src/core/status.js';
import { applySummary, readinessSummary } from '../src/core/step-summaries.js';
import type { CarriedState, RoundOutcome } from './definitions.js';
import { gatewayRetryMaxSeconds, type gatewaySteps } from './gateway.js';
import type { PatchId } from './patches.js';
import type { rolloutSteps } from './rollouts.js';
import { failureOf, localFirst as kubeStep } from './steps.js';

const invalidSpec: FailureType = 'InvalidSpec';
const readAndApplyPatch: PatchId = 'read-and-apply';

/** A round's outcome, and what the loop alone needs: when to look next, whether that is a requeue. */
export type Round = RoundOutcome & { nextCheckSeconds: number; requeued?: boolean };

/** What a round works with: the workflow's carried state and the steps the loop made for it. */
export interface RoundContext {
  key: { namespace: string; name: string };
  cfg: WorkflowConfig;
  state: CarriedState;
  rollouts: ReturnType<typeof rolloutSteps>;
  gateway: ReturnType<typeof gatewaySteps>;
  /** Writes the status (a step) and keeps the phase it wrote. */
  writeStatus(
    ref: ModelRef,
    generation: number,
    verdict: Verdict,
    extra?: Partial<WriteStatusInput>,
    changes?: string[],
  ): Promise<{ phase?: RoundOutcome['phase']; conditions: RoundOutcome['conditions'] }>;
  setPhase(phase: RoundOutcome['phase']): void;
  /** What the last round saw and ran, for the Web UI's summaries and current details. */
  seen: { readiness?: string; image?: string };
}

/** The round of this model: call it once a round. */
export function modelRound(ctx: RoundContext): () => Promise<Round> {
  const { key, cfg, state, rollouts, gateway, writeStatus, setPhase, seen } = ctx;
  const label = `${key.namespace}/${key.name}`;

  /** One round: read the object, then apply or clean up as the finalizer table says. */
  async function reconcile(): Promise<Round> {
    const n = ++state.rounds;
    const outcome = (fields: Partial<Omit<Round, 'nextCheckSeconds'>>, next = cfg.driftCheckSeconds): Round => ({
      round: n,
      phase: state.phase,
      conditions: [],
      changes: [],
      finished: false,
      ...fields,
      nextCheckSeconds: next,
    });

    state.echoes = [];
    const looked: ReadAndApplyResult = patched(readAndApplyPatch)
      ? await readAndApply()
      : { model: await kubeStep('readModel', `read MachineModel ${label}`, key) };
    const { model } = looked;
    const previous = state.uid ? { ...key, uid: state.uid } : undefined;
    // Without a gateway nothing lies outside the namespace to clean: no finalizer, so no deletion waits on us.
    const lifecycle = lifecycleOf(model, model?.gatewayConfigured !== false);
    if (lifecycle.step === 'gone') {
      // Gone without our finalizer having run (removed by force): its route must still go.
      if (previous) await gateway.forget(previous);
      return outcome({ finished: true, message: `MachineModel ${label} no longer exists` });
    }
    await observeIdentity(model!, previous);
    return lifecycle.step === 'cleanup'
      ? cleanup(model!, lifecycle.removeFinalizer, outcome)
      : apply(model!, lifecycle.addFinalizer, outcome, looked);
  }

  /**
   * The round's first step: it reads the object, applies its children when that is all the round can
   * do, and writes the status too when nothing lies between (no rollout followed here; the activity
   * judges the rest). Its result says how far it went; the round takes the remaining steps itself.
   */
  function readAndApply(): Promise<ReadAndApplyResult> {
    const promoted = rollouts.promoted();
    const report: ReportContext | undefined = !state.rollout
      ? {
          followed: {
            uid: state.uid,
            lastGeneration: state.lastGeneration,
            progressStartedAt: state.progressStartedAt,
            notReadyChecks: state.notReadyChecks,
          },
          ...(state.phase ? { phase: state.phase } : {}),
          now: Date.now(),
          config: {
            progressDeadlineSeconds: cfg.progressDeadlineSeconds,
            driftCheckSeconds: cfg.driftCheckSeconds,
            readinessRecheckSeconds: cfg.readinessRecheckSeconds,
          },
        }
      : undefined;
    const summary = report
      ? `read MachineModel ${label}; apply its children and write its status if that is all it needs`
      : `read MachineModel ${label}; apply its children if that is all it needs`;
    return kubeStep('readAndApply', summary, {
      key,
      followedUid: state.uid,
      ...(promoted ? { promoted } : {}),
      ...(report ? { report } : {}),
    });
  }

  /** First sight, a new object of the same name, or a new generation: progress starts over. */
  async function observeIdentity(model: ModelSnapshot, previous: ModelRef | undefined) {
    const { ref, generation } = model;
    const progress = progressOnSight(state, { uid: ref.uid, generation });
    if (state.uid !== ref.uid) {
      // The previous object's route is removed by its own uid, so the new object's is never touched.
      if (previous) await gateway.forget(previous);
      state.uid = ref.uid;
      // The informer starts a run with the uid it saw as memo: an event less when it is still the one.
      if (workflowInfo().memo?.uid !== ref.uid) upsertMemo({ uid: ref.uid });
    }
    state.lastGeneration = generation;
    state.progressStartedAt = progress.progressStartedAt;
    state.notReadyChecks = progress.notReadyChecks;
  }

  type Outcome = (fields: Partial<Omit<Round, 'nextCheckSeconds'>>, next?: number) => Round;

  async function cleanup(model: ModelSnapshot, removeFinalizer: boolean, outcome: Outcome): Promise<Round> {
    const { ref, generation } = model;
    // Without a gateway nothing can hold the finalizer: no Deleting status that nobody would see.
    const waitsForGateway = model.gatewayConfigured !== false;
    if (waitsForGateway) {
      await writeStatus(ref, generation, { kind: 'deleting', message: 'cleaning up before the finalizer is removed' });
    }
    const changes: string[] = [...(await rollouts.forget())];
    try {
      if (waitsForGateway && (await gateway.unpublish(ref, generation))) changes.push('gateway route removed');
      if (removeFinalizer) {
        await kubeStep('removeFinalizer', 'remove finalizer', ref);
        changes.push('finalizer removed');
      }
    } catch (err) {
      const failure = failureOf(err);
      if (!failure) throw err;
      // Whatever failed, the finalizer stays and cleanup runs again.
      const message = `cleanup could not finish (${failure.message}); keeping the finalizer and retrying`;
      return outcome({ changes, message, requeued: true }, requeueSeconds);
    }
    return outcome({ finished: true, changes, message: `MachineModel ${label} deleted` });
  }

  /** `looked`: what the round's read step did beyond reading: the children applied, or the apply refused. */
  async function apply(
    model: ModelSnapshot,
    addFinalizer: boolean,
    outcome: Outcome,
    looked: Omit<ReadAndApplyResult, 'model'>,
  ): Promise<Round> {
    const { ref, generation } = model;
    const changes: string[] = [];
    /** A failed step, as the error policy says: Failed, Deleting, or a requeue. */
    const failed = async (failure: StepFailure): Promise<Round> => {
      const decision = errorPolicy(failure);
      switch (decision.kind) {
        case 'failed': {
          const status = await writeStatus(ref, generation, decision);
          return outcome({ changes, conditions: status.conditions, message: decision.message });
        }
        case 'deletion-pending': {
          const status = await writeStatus(ref, generation, { kind: 'deleting', message: decision.message });
          return outcome({ changes, conditions: status.conditions, message: decision.message });
        }
        case 'requeue':
          return outcome({ changes, message: decision.message, requeued: true }, decision.afterSeconds);
      }
    };
    if (looked.refused) return failed(looked.refused);
    try {
      if (addFinalizer) {
        const { written } = await kubeStep('ensureFinalizer', 'add finalizer', ref);
        if (written) state.echoes.push(written);
        changes.push('finalizer added');
      }
      if (model.specErrors.length > 0) {
        const message = model.specErrors.join('; ');
        const status = await writeStatus(ref, generation, { kind: 'failed', reason: invalidSpec, message });
        return outcome({ changes, conditions: status.conditions, message: 'invalid spec: waiting for it to change' });
      }
      seen.image = model.spec.image;
      const promoted = rollouts.promoted();
      const applied =
        looked.applied ??
        (await (promoted
          ? kubeStep('applyChildren', applySummary(model.spec), model, { promoted })
          : kubeStep('applyChildren', applySummary(model.spec), model)));
      changes.push(...applied.changes);
      state.echoes.push(...applied.written);
      const { readiness } = applied;
      const { reported } = looked;
      const decision = reported?.progress ?? decideProgress(state, isReady(readiness), Date.now(), cfg);
      state.progressStartedAt = decision.progressStartedAt;
      state.notReadyChecks = decision.notReadyChecks;
      seen.readiness = readinessSummary(readiness);
      if (reported) {
        setPhase(reported.status.phase);
        return outcome({ changes, conditions: reported.status.conditions }, decision.nextCheckSeconds);
      }
      // Only a model that has or had a rollout (or a canary left to remove) takes the rollout's steps.
      const withRollout = !!(model.spec.rollout || state.rollout || applied.canary);
      const rollout = withRollout ? await rollouts.follow(model, applied) : undefined;
      if (rollout) changes.push(...rollout.changes);
      // The route carries the canary's share as this round decides it: put when Ready, and whenever the share changes.
      const share = withRollout ? rollouts.share(applied) : { weight: 0, changed: false };
      const publishes = decision.verdict.kind === 'ready' || (share.changed && state.routeRegistered);
      const route = publishes ? await gateway.publish(model, share.weight) : undefined;
      if (route) changes.push(...route.changes);
      // With the gateway away the route may still carry the last share: the canary stays as it is.
      if (!route?.retrySoon) {
        state.canaryShare = share.weight;
        if (withRollout) changes.push(...(await rollouts.keepCanary(model, applied, share)));
      }
      const verdict: Verdict = rollout?.failed
        ? { kind: 'failed', reason: 'RolloutFailed', message: rollout.failed }
        : decision.verdict;
      const status = await writeStatus(
        ref,
        generation,
        verdict,
        {
          readiness,
          inferenceURL: applied.inferenceURL,
          selector: applied.selector,
          gatewayURL: route?.url,
          extraConditions: route?.condition ? [route.condition] : [],
          ...(rollout?.status ? { rollout: rollout.status } : {}),
        },
        changes,
      );
      const next = route?.retrySoon
        ? Math.min(decision.nextCheckSeconds, gatewayRetryMaxSeconds)
        : decision.nextCheckSeconds;
      return outcome({ changes, conditions: status.conditions }, next);
    } catch (err) {
      const failure = failureOf(err);
      if (!failure) throw err;
      return failed(failure);
    }
  }

  return reconcile;
}
