// The reconcile loop of one MachineModel, as a durable workflow: orchestration only. Every read and
// write is an activity; every decision is a pure function from src/.
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setCurrentDetails,
  sleep,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { Activities, ModelSnapshot } from '../activities/index.js';
import type { ModelRef, Phase } from '../src/core/api.js';
import { defaultWorkflowConfig, type WorkflowConfig } from '../src/core/reconcile-timing.js';
import { decideProgress } from '../src/core/progress.js';
import { phaseAttribute } from './search-attributes.js';
import { isReady, type Verdict } from '../src/core/status.js';
import {
  deletedSignal,
  reconcileNowUpdate,
  reconcileSignal,
  resyncSignal,
  stateQuery,
  type CarriedState,
  type MachineModelWorkflowInput,
  type RoundOutcome,
} from './definitions.js';

const activityOptions: ActivityOptions = {
  // Each activity is one or a few API calls; a short limit lets a crashed worker's tasks move on quickly.
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
};
// A gateway outage must not hold a round: a few quick attempts, then the workflow says so in a
// condition and retries on its own timer.
const gatewayOptions: ActivityOptions = {
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '4 seconds', maximumAttempts: 3 },
};
const activities = proxyActivities<Activities>(activityOptions);

/** Runs an activity with a one-line summary that the Web UI shows in the event history. */
function step<K extends keyof Activities>(
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  return stepWith(activityOptions, name, summary, ...args);
}

function stepWith<K extends keyof Activities>(
  options: ActivityOptions,
  name: K,
  summary: string,
  ...args: Parameters<Activities[K]>
): ReturnType<Activities[K]> {
  const fn = activities[name] as unknown as {
    executeWithOptions(o: ActivityOptions, a: unknown[]): ReturnType<Activities[K]>;
  };
  return fn.executeWithOptions({ ...options, summary }, args);
}

/** Gateway registration (route publication and removal) was added after the first release. */
const gatewayPatch = 'gateway-registration';
/** A finished run continues as new only for signals that may concern another object of its name. */
const ownSignalsPatch = 'finish-ignores-own-signals';
/** Longest wait between attempts to remove a route while the gateway is away. */
const gatewayRetryMaxSeconds = 30;

/** A non-retryable activity failure (invalid spec, not owned, forbidden, rejected) becomes a Failed phase. */
function failureOf(err: unknown): { reason: string; message: string } | undefined {
  if (!(err instanceof ActivityFailure)) return undefined;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) return { reason: cause.type ?? 'ReconcileError', message: cause.message };
  return { reason: 'ReconcileError', message: cause?.message ?? err.message };
}

function gatewayCondition(status: 'True' | 'False' | 'Unknown', reason: string, message: string) {
  return { type: 'GatewayRegistered', status, reason, message };
}

export async function machineModelWorkflow(input: MachineModelWorkflowInput): Promise<RoundOutcome> {
  const cfg: WorkflowConfig = { ...defaultWorkflowConfig, ...input.config };
  const key = { namespace: input.namespace, name: input.name };
  const label = `${key.namespace}/${key.name}`;
  const state: CarriedState = input.state ?? { notReadyChecks: 0, rounds: 0, signals: 0, runs: 0 };
  state.runs++;
  // Level-triggered: every run begins by looking, unless it continues a quiet predecessor.
  let dirty = input.dirty ?? true;
  let nextCheckSeconds = input.nextCheckSeconds ?? 0;
  let roundInProgress = false;
  let finished = false;
  let lastRoundEndedAt = 0;

  /** Set by a signal that may concern another object of this name (or says nothing of which). */
  let foreignSignal = false;
  const wake = (uid?: string) => {
    state.signals++;
    dirty = true;
    if (!uid || uid !== state.uid) foreignSignal = true;
  };
  setHandler(reconcileSignal, (hint) => wake(hint.uid));
  setHandler(resyncSignal, () => wake());
  setHandler(deletedSignal, ({ uid }) => wake(uid));
  setHandler(stateQuery, () => ({ ...state, ...key, pendingWork: dirty, roundInProgress, config: cfg }));
  setHandler(reconcileNowUpdate, async () => {
    // The answer must come from a round that starts after this request.
    const target = state.rounds + 1;
    dirty = true;
    await condition(() => (state.lastOutcome?.round ?? 0) >= target || finished);
    return state.lastOutcome!;
  });

  const setPhase = (phase: Phase | undefined) => {
    if (!phase || phase === state.phase) return;
    state.phase = phase;
    upsertSearchAttributes([{ key: phaseAttribute, value: phase }]);
  };

  const writeStatus = async (
    ref: ModelRef,
    generation: number,
    verdict: Verdict,
    extra: Partial<Parameters<Activities['writeStatus']>[1]> = {},
  ) => {
    const written = await step('writeStatus', `status: ${verdict.kind}`, ref, { generation, verdict, ...extra });
    setPhase(written.phase);
    return written;
  };

  /**
   * Removes the model's route, retrying with capped backoff for as long as the gateway is away: the
   * finalizer (if any) stays until the gateway confirms. While the object exists, a condition and an
   * Event say why deletion waits.
   */
  async function removeRoute(ref: ModelRef, generation?: number): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        const { removed } = await stepWith(gatewayOptions, 'unregisterRoute', 'remove gateway route', ref);
        state.routeRegistered = false;
        return removed;
      } catch (err) {
        const failure = failureOf(err);
        if (!failure) throw err;
        const message = `the gateway has not confirmed the route's removal (${failure.message}); keeping the finalizer and retrying`;
        if (generation !== undefined) {
          await writeStatus(
            ref,
            generation,
            { kind: 'deleting', message },
            {
              extraConditions: [gatewayCondition('Unknown', 'UnregisterPending', message)],
            },
          );
          if (attempt % 10 === 0)
            await step('recordModelEvent', 'event: gateway unavailable', ref, 'Warning', 'GatewayUnavailable', message);
        }
        dirty = false;
        await condition(() => dirty, `${Math.min(2 ** attempt * 2, gatewayRetryMaxSeconds)} seconds`, {
          summary: 'wait for the gateway to come back',
        });
      }
    }
  }

  async function round(): Promise<RoundOutcome & { nextCheckSeconds: number }> {
    const n = ++state.rounds;
    const outcome = (fields: Partial<RoundOutcome>, next = cfg.driftCheckSeconds) => ({
      round: n,
      phase: state.phase,
      conditions: [],
      changes: [],
      finished: false,
      ...fields,
      nextCheckSeconds: next,
    });
    const snap = await step('readModel', `read MachineModel ${label}`, key);
    const previous = state.uid ? { ...key, uid: state.uid } : undefined;
    if (!snap) {
      // Gone without our finalizer having run (removed by force): its route must still go.
      if (previous && state.routeRegistered && patched(gatewayPatch)) await removeRoute(previous);
      return outcome({ finished: true, message: `MachineModel ${label} no longer exists` });
    }

    const { ref, generation } = snap;
    if (state.uid !== ref.uid) {
      // First sight, or a new object of the same name: the previous one is gone and so is its progress.
      // Its route is removed by its own uid, so the new object's route is never touched.
      if (previous && state.routeRegistered && patched(gatewayPatch)) await removeRoute(previous);
      state.uid = ref.uid;
      state.progressStartedAt = undefined;
      state.notReadyChecks = 0;
      upsertMemo({ uid: ref.uid });
    }
    if (state.lastGeneration !== generation) {
      state.lastGeneration = generation;
      state.progressStartedAt = undefined;
      state.notReadyChecks = 0;
    }

    if (snap.deleting) {
      await writeStatus(ref, generation, { kind: 'deleting', message: 'cleaning up before the finalizer is removed' });
      const changes: string[] = [];
      if (patched(gatewayPatch) && (await removeRoute(ref, generation))) changes.push('gateway route removed');
      if (snap.hasFinalizer) {
        await step('removeFinalizer', 'remove finalizer', ref);
        changes.push('finalizer removed');
      }
      return outcome({ finished: true, changes, message: `MachineModel ${label} deleted` });
    }

    const changes: string[] = [];
    try {
      if (!snap.hasFinalizer) {
        await step('ensureFinalizer', 'add finalizer', ref);
        changes.push('finalizer added');
      }
      if (snap.specErrors.length > 0) {
        const w = await writeStatus(ref, generation, {
          kind: 'failed',
          reason: 'InvalidSpec',
          message: snap.specErrors.join('; '),
        });
        return outcome({ changes, conditions: w.conditions, message: 'invalid spec: waiting for it to change' });
      }
      const applied = await step('applyChildren', 'apply Deployment, Service, HPA', snap);
      changes.push(...applied.changes);
      const readiness = await step('observeReadiness', 'observe readiness', ref, applied.autoscaler);
      const decision = decideProgress(state, isReady(readiness), Date.now(), cfg);
      state.progressStartedAt = decision.progressStartedAt;
      state.notReadyChecks = decision.notReadyChecks;
      let nextCheck = decision.nextCheckSeconds;
      // Published once Ready; an idempotent check each Ready round keeps the route in step with the spec.
      const gateway = decision.verdict.kind === 'ready' && patched(gatewayPatch) ? await publish(snap) : undefined;
      if (gateway) {
        changes.push(...gateway.changes);
        if (gateway.retrySoon) nextCheck = Math.min(nextCheck, gatewayRetryMaxSeconds);
      }
      const w = await writeStatus(ref, generation, decision.verdict, {
        readiness,
        inferenceURL: applied.inferenceURL,
        selector: applied.selector,
        gatewayURL: gateway?.url,
        extraConditions: gateway?.condition ? [gateway.condition] : [],
      });
      return outcome({ changes, conditions: w.conditions }, nextCheck);
    } catch (err) {
      const failure = failureOf(err);
      if (!failure) throw err;
      const w = await writeStatus(ref, generation, { kind: 'failed', ...failure });
      return outcome({ changes, conditions: w.conditions, message: failure.message });
    }
  }

  let roundsThisRun = 0;
  /** Registers the route; a gateway outage becomes a condition and an early retry instead of a stuck round. */
  async function publish(snap: ModelSnapshot) {
    try {
      const r = await stepWith(gatewayOptions, 'registerRoute', 'publish on the gateway', snap);
      if (!r.configured) return undefined;
      state.routeRegistered = r.registered || state.routeRegistered;
      return { changes: r.changes, condition: r.condition, url: r.url ?? null, retrySoon: false };
    } catch (err) {
      const failure = failureOf(err);
      if (!failure) throw err;
      return {
        changes: [],
        condition: gatewayCondition('Unknown', 'GatewayUnavailable', `${failure.message}; retrying`),
        url: undefined,
        retrySoon: true,
      };
    }
  }

  for (;;) {
    if (!dirty) {
      await condition(() => dirty, `${nextCheckSeconds} seconds`, {
        summary:
          state.phase === 'Ready' ? 'idle: wait for a change or the drift check' : 'wait for readiness or a change',
      });
    }
    const sinceLast = Date.now() - lastRoundEndedAt;
    if (sinceLast < cfg.minRoundIntervalMs) {
      await sleep(cfg.minRoundIntervalMs - sinceLast, { summary: 'rate limit: let a burst of changes coalesce' });
    }
    dirty = false;
    foreignSignal = false;
    roundInProgress = true;
    const { nextCheckSeconds: next, ...outcome } = await round();
    roundInProgress = false;
    lastRoundEndedAt = Date.now();
    nextCheckSeconds = next;
    state.lastOutcome = outcome;
    setCurrentDetails(
      `**${label}** phase **${state.phase ?? 'unknown'}** · round ${outcome.round}` +
        (outcome.changes.length ? ` · ${outcome.changes.join(', ')}` : '') +
        (outcome.message ? `\n\n${outcome.message}` : ''),
    );

    if (outcome.finished) {
      // Signals about the object just finished (its own finalizer removal, its deletion) need no new run.
      if (patched(ownSignalsPatch) ? foreignSignal : dirty) {
        // Something happened to the name after we looked (a new object of the same name): start clean.
        await condition(allHandlersFinished);
        return continueAsNew<typeof machineModelWorkflow>({
          namespace: key.namespace,
          name: key.name,
          config: input.config,
        });
      }
      finished = true;
      await condition(allHandlersFinished);
      return outcome;
    }
    if (++roundsThisRun >= cfg.maxRoundsPerRun || workflowInfo().continueAsNewSuggested) {
      await condition(allHandlersFinished);
      return continueAsNew<typeof machineModelWorkflow>({ ...input, state, dirty, nextCheckSeconds });
    }
  }
}
