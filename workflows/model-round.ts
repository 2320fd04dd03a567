// One round of a MachineModel's reconcile, as its workflow runs it: read the object, then apply or
// clean up as the finalizer table says (src/core/lifecycle.ts). The loop around it (machine-model.ts:
// signals, waits, continue-as-new) is kube-rs's Controller; this is its `reconcile`. Orchestration
// only: every read and write is a step (an activity), every decision a pure function (src/core/).
//
// Read top to bottom: `reconcile` reads the object (with its children applied when that is all the
// round can do) and takes the finalizer table's step. `apply`'s phases, in order: the finalizer; an
// invalid spec refused (`refuseSpec`); the children (`applyChildren`); the one progress decision
// (`followProgress`); the rollout (`followRollout`: start, follow or end it; the canary's share);
// the route with that share, then the canary's objects (`publishShare`); the status (`report`).
import { deprecatePatch, upsertMemo, workflowInfo } from '@temporalio/workflow';
import type {
  ApplyResult,
  ModelSnapshot,
  ReadAndApplyResult,
  ReportContext,
  WriteStatusInput,
} from '../activities/index.js';
import type { ModelRef } from '../src/core/api.js';
import { errorPolicy, requeueSeconds, type FailureType, type StepFailure } from '../src/core/failures.js';
import { lifecycleOf } from '../src/core/lifecycle.js';
import { progressOfRound, progressOnSight, type ProgressDecision } from '../src/core/progress.js';
import type { WorkflowConfig } from '../src/core/reconcile-timing.js';
import { isReady, type Verdict } from '../src/core/status.js';
import type { GatewayCondition } from '../src/core/route-rules.js';
import { validateGateway } from '../src/core/validation.js';
import { applySummary, readinessSummary } from '../src/core/step-summaries.js';
import type { CarriedState, RoundOutcome } from './definitions.js';
import { gatewayRetryMaxSeconds, type modelGateway, type Publication } from './gateway.js';
import type { PatchId } from './patches.js';
import type { ModelRollouts, RolloutFollowUp, RoundShare } from './rollouts.js';
import { failureOf, kubeStep } from './steps.js';

const invalidSpec: FailureType = 'InvalidSpec';
const invalidSpecWithdrawsCanary: PatchId = 'invalid-spec-withdraws-canary';

/** What a round followed of the model's rollout: none for a model that never had one. */
interface RoundRollout {
  followUp?: RolloutFollowUp;
  share: RoundShare;
}

/** A round's outcome, and what the loop alone needs: when to look next, whether that is a requeue. */
export type Round = RoundOutcome & { nextCheckSeconds: number; requeued?: boolean };

/** What a round works with: the workflow's carried state and the steps the loop made for it. */
export interface RoundContext {
  key: { namespace: string; name: string };
  cfg: WorkflowConfig;
  state: CarriedState;
  rollouts: ModelRollouts;
  gateway: ReturnType<typeof modelGateway>;
  /** Writes the status (a step) and keeps the phase it wrote. */
  writeStatus(
    ref: ModelRef,
    generation: number,
    verdict: Verdict,
    extra?: Partial<WriteStatusInput>,
    changes?: string[],
  ): Promise<{ phase?: RoundOutcome['phase']; conditions: RoundOutcome['conditions'] }>;
  setPhase(phase: RoundOutcome['phase']): void;
  /** The round's workflow time for its decisions: when it started (docs/workflow-versioning.md, "Workflow time"). */
  now(): number;
  /** What the last round saw and ran, for the Web UI's summaries and current details. */
  seen: { readiness?: string; image?: string };
}

/** The round of this model: call it once a round. */
export function modelRound(ctx: RoundContext): () => Promise<Round> {
  return () => reconcile(ctx);
}

const labelOf = ({ key }: RoundContext) => `${key.namespace}/${key.name}`;

/** One round: read the object, then apply or clean up as the finalizer table says. */
async function reconcile(ctx: RoundContext): Promise<Round> {
  const { key, cfg, state, gateway } = ctx;
  const label = labelOf(ctx);
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
  const looked = await readAndApply(ctx);
  const { model } = looked;
  const previous = state.uid ? { ...key, uid: state.uid } : undefined;
  // Without a gateway nothing lies outside the namespace to clean: no finalizer, so no deletion waits on us.
  const lifecycle = lifecycleOf(model, model?.gatewayConfigured !== false);
  if (lifecycle.step === 'gone') {
    // Gone without our finalizer having run (removed by force): its route must still go.
    if (previous) await gateway.forget(previous);
    return outcome({ finished: true, message: `MachineModel ${label} no longer exists` });
  }
  await observeIdentity(ctx, model!, previous);
  return lifecycle.step === 'cleanup'
    ? cleanup(ctx, model!, lifecycle.removeFinalizer, outcome)
    : apply(ctx, model!, lifecycle.addFinalizer, outcome, looked);
}

/**
 * The round's first step: it reads the object, applies its children when that is all the round can
 * do, and writes the status too when nothing lies between (no rollout followed here; the activity
 * judges the rest). Its result says how far it went; the round takes the remaining steps itself.
 */
function readAndApply(ctx: RoundContext): Promise<ReadAndApplyResult> {
  const { key, cfg, state, rollouts } = ctx;
  const label = labelOf(ctx);
  const promoted = rollouts.promoted();
  const { progressDeadlineSeconds, driftCheckSeconds, readinessRecheckSeconds } = cfg;
  const report: ReportContext | undefined = !state.rollout
    ? {
        followed: {
          uid: state.uid,
          lastGeneration: state.lastGeneration,
          progressStartedAt: state.progressStartedAt,
          notReadyChecks: state.notReadyChecks,
        },
        ...(state.phase ? { phase: state.phase } : {}),
        now: ctx.now(),
        config: { progressDeadlineSeconds, driftCheckSeconds, readinessRecheckSeconds },
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
async function observeIdentity(ctx: RoundContext, model: ModelSnapshot, previous: ModelRef | undefined) {
  const { state, gateway } = ctx;
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

async function cleanup(
  ctx: RoundContext,
  model: ModelSnapshot,
  removeFinalizer: boolean,
  outcome: Outcome,
): Promise<Round> {
  const { rollouts, gateway, writeStatus } = ctx;
  const label = labelOf(ctx);
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
  ctx: RoundContext,
  model: ModelSnapshot,
  addFinalizer: boolean,
  outcome: Outcome,
  looked: Omit<ReadAndApplyResult, 'model'>,
): Promise<Round> {
  const { setPhase } = ctx;
  const changes: string[] = [];
  const failed = (failure: StepFailure) => failedRound(ctx, model, failure, changes, outcome);
  if (looked.refused) return failed(looked.refused);
  try {
    if (addFinalizer) await ensureFinalizer(ctx, model.ref, changes);
    if (model.specErrors.length > 0) return await refuseSpec(ctx, model, changes, outcome);
    const applied = await applyChildren(ctx, model, looked.applied, changes);
    const progress = followProgress(ctx, model, applied, looked.reported?.progress);
    if (looked.reported) {
      setPhase(looked.reported.status.phase);
      return outcome({ changes, conditions: looked.reported.status.conditions }, progress.nextCheckSeconds);
    }
    const rollout = await followRollout(ctx, model, applied, changes);
    const route = await publishShare(ctx, model, applied, progress.verdict, rollout, changes);
    return await report(ctx, model, applied, progress, rollout, route, changes, outcome);
  } catch (err) {
    const failure = failureOf(err);
    if (!failure) throw err;
    return failed(failure);
  }
}

/** A failed step, as the error policy says: Failed, Deleting, or a requeue. */
async function failedRound(
  ctx: RoundContext,
  model: ModelSnapshot,
  failure: StepFailure,
  changes: string[],
  outcome: Outcome,
) {
  const { writeStatus } = ctx;
  const { ref, generation } = model;
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
}

async function ensureFinalizer(ctx: RoundContext, ref: ModelRef, changes: string[]) {
  const { state } = ctx;
  const { written } = await kubeStep('ensureFinalizer', 'add finalizer', ref);
  if (written) state.echoes.push(written);
  changes.push('finalizer added');
}

/**
 * An invalid spec: Failed until it changes. A canary the spec can no longer be judged for loses its
 * rollout, its share and its Pods; the stable revision serves.
 */
async function refuseSpec(
  ctx: RoundContext,
  model: ModelSnapshot,
  changes: string[],
  outcome: Outcome,
): Promise<Round> {
  const { cfg, state, writeStatus } = ctx;
  const { ref, generation } = model;
  const message = model.specErrors.join('; ');
  // A canary may stand while a rollout is recorded whose canary was not withdrawn, or a share is set.
  const canaryMayStand = (state.rollout && !state.rollout.canaryWithdrawn) || (state.canaryShare ?? 0) > 0;
  if (canaryMayStand) deprecatePatch(invalidSpecWithdrawsCanary);
  const withdrawal = canaryMayStand ? await withdrawCanary(ctx, model, changes) : undefined;
  const extra = withdrawal?.condition ? { extraConditions: [withdrawal.condition] } : {};
  const status = await writeStatus(ref, generation, { kind: 'failed', reason: invalidSpec, message }, extra);
  const next = withdrawal?.retrySoon ? gatewayRetryMaxSeconds : cfg.driftCheckSeconds;
  return outcome({ changes, conditions: status.conditions, message: 'invalid spec: waiting for it to change' }, next);
}

/**
 * The running rollout cancelled (started again once the spec is valid), all requests back to the
 * stable revision, then the canary removed. The route is put again from this spec only when its
 * gateway part is valid, and the canary goes only once the route no longer sends it requests.
 */
async function withdrawCanary(
  ctx: RoundContext,
  model: ModelSnapshot,
  changes: string[],
): Promise<{ retrySoon: boolean; condition?: GatewayCondition }> {
  const { state, rollouts, gateway } = ctx;
  changes.push(...(await rollouts.withdraw('the spec is invalid')));
  let route: Publication | undefined;
  if ((state.canaryShare ?? 0) > 0 && state.routeRegistered) {
    // The route would move to what the invalid part says: the canary keeps its share until it is fixed.
    if (validateGateway(model.spec.gateway).length > 0) return { retrySoon: false };
    route = await gateway.publish(model, 0);
    if (route) changes.push(...route.changes);
    if (route?.retrySoon || !routeSendsNoShare(route))
      return { retrySoon: !!route?.retrySoon, condition: route?.condition };
  }
  state.canaryShare = 0;
  changes.push(...(await rollouts.removeCanary(model.ref)));
  return { retrySoon: false, condition: route?.condition };
}

/** After a put at 0 %: the route is there without the canary, or no route of the model is left. */
function routeSendsNoShare(route: Publication | undefined): boolean {
  if (!route) return true;
  const { status, reason } = route.condition ?? {};
  return (
    status === 'True' || ['Disabled', 'PathNotAllowed', 'HostnameNotAllowed', 'PathConflict'].includes(reason ?? '')
  );
}

/** The children as the read step applied them, or applied now as a step of their own. */
async function applyChildren(
  ctx: RoundContext,
  model: ModelSnapshot,
  appliedByRead: ApplyResult | undefined,
  changes: string[],
) {
  const { state, rollouts, seen } = ctx;
  seen.image = model.spec.image;
  const promoted = rollouts.promoted();
  const applied =
    appliedByRead ??
    (await (promoted
      ? kubeStep('applyChildren', applySummary(model.spec), model, { promoted })
      : kubeStep('applyChildren', applySummary(model.spec), model)));
  changes.push(...applied.changes);
  state.echoes.push(...applied.written);
  return applied;
}

/** Ready, progressing or past its deadline, as the read step decided it or decided here; kept for the next round. */
function followProgress(
  ctx: RoundContext,
  model: ModelSnapshot,
  applied: ApplyResult,
  decidedByRead?: ProgressDecision,
) {
  const { cfg, state, seen } = ctx;
  const sight = { uid: model.ref.uid, generation: model.generation };
  const decision = decidedByRead ?? progressOfRound(state, sight, isReady(applied.readiness), ctx.now(), cfg);
  state.progressStartedAt = decision.progressStartedAt;
  state.notReadyChecks = decision.notReadyChecks;
  seen.readiness = readinessSummary(applied.readiness);
  return decision;
}

/** Only a model that has or had a rollout (or a canary left to remove) takes the rollout's steps. */
async function followRollout(
  ctx: RoundContext,
  model: ModelSnapshot,
  applied: ApplyResult,
  changes: string[],
): Promise<RoundRollout> {
  const { state, rollouts } = ctx;
  if (!(model.spec.rollout || state.rollout || applied.canary)) return { share: { weight: 0, changed: false } };
  const followUp = await rollouts.follow(model, applied);
  changes.push(...followUp.changes);
  // The share is decided after follow: a rollout started or cancelled there counts this round.
  return { followUp, share: rollouts.share(applied) };
}

/**
 * The route carries the canary's share as this round decided it: put when Ready, and whenever the
 * share changes. Then the canary's objects as the share needs them, unless the gateway was away.
 */
async function publishShare(
  ctx: RoundContext,
  model: ModelSnapshot,
  applied: ApplyResult,
  verdict: ProgressDecision['verdict'],
  rollout: RoundRollout,
  changes: string[],
): Promise<Publication | undefined> {
  const { state, rollouts, gateway } = ctx;
  const { share, followUp } = rollout;
  const publishes = verdict.kind === 'ready' || (share.changed && state.routeRegistered);
  const route = publishes ? await gateway.publish(model, share.weight) : undefined;
  if (route) changes.push(...route.changes);
  // With the gateway away the route may still carry the last share: the canary stays as it is.
  if (!route?.retrySoon) {
    state.canaryShare = share.weight;
    if (followUp) changes.push(...(await rollouts.keepCanary(model, applied, share)));
  }
  return route;
}

/** The status, with what the round applied, published and followed; when to look again. */
async function report(
  ctx: RoundContext,
  model: ModelSnapshot,
  applied: ApplyResult,
  progress: ProgressDecision,
  { followUp }: RoundRollout,
  route: Publication | undefined,
  changes: string[],
  outcome: Outcome,
): Promise<Round> {
  const { writeStatus } = ctx;
  const verdict: Verdict = followUp?.failed
    ? { kind: 'failed', reason: 'RolloutFailed', message: followUp.failed }
    : progress.verdict;
  const extra: Partial<WriteStatusInput> = {
    readiness: applied.readiness,
    inferenceURL: applied.inferenceURL,
    selector: applied.selector,
    gatewayURL: route?.url,
    extraConditions: route?.condition ? [route.condition] : [],
    ...(followUp?.status ? { rollout: followUp.status } : {}),
  };
  const status = await writeStatus(model.ref, model.generation, verdict, extra, changes);
  const next = route?.retrySoon
    ? Math.min(progress.nextCheckSeconds, gatewayRetryMaxSeconds)
    : progress.nextCheckSeconds;
  return outcome({ changes, conditions: status.conditions }, next);
}
