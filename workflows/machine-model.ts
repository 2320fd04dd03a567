// The reconcile loop of one MachineModel, as a durable workflow: orchestration only. Every read and
// write is an activity; every decision is a pure function from src/.
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  proxyActivities,
  setCurrentDetails,
  sleep,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { ModelRef, Phase } from '../src/api.js';
import { decideProgress } from '../src/progress.js';
import { phaseAttribute } from '../src/search-attributes.js';
import { isReady, type Verdict } from '../src/status.js';
import {
  defaultWorkflowConfig,
  deletedSignal,
  reconcileNowUpdate,
  reconcileSignal,
  resyncSignal,
  stateQuery,
  type CarriedState,
  type MachineModelWorkflowInput,
  type RoundOutcome,
  type WorkflowConfig,
} from './definitions.js';

const activityOptions: ActivityOptions = {
  // Each activity is one or a few API calls; a short limit lets a crashed worker's tasks move on quickly.
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
};
const k8s = proxyActivities<Activities>(activityOptions);

/** Runs an activity with a one-line summary that the Web UI shows in the event history. */
function step<K extends keyof Activities>(name: K, summary: string, ...args: Parameters<Activities[K]>): ReturnType<Activities[K]> {
  const fn = k8s[name] as unknown as { executeWithOptions(o: ActivityOptions, a: unknown[]): ReturnType<Activities[K]> };
  return fn.executeWithOptions({ ...activityOptions, summary }, args);
}

/** A non-retryable activity failure (invalid spec, not owned, forbidden, rejected) becomes a Failed phase. */
function failureOf(err: unknown): { reason: string; message: string } | undefined {
  if (!(err instanceof ActivityFailure)) return undefined;
  const cause = err.cause;
  if (cause instanceof ApplicationFailure) return { reason: cause.type ?? 'ReconcileError', message: cause.message };
  return { reason: 'ReconcileError', message: cause?.message ?? err.message };
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

  const wake = () => {
    state.signals++;
    dirty = true;
  };
  setHandler(reconcileSignal, wake);
  setHandler(resyncSignal, wake);
  setHandler(deletedSignal, wake);
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

  const writeStatus = async (ref: ModelRef, generation: number, verdict: Verdict, extra: Partial<Parameters<Activities['writeStatus']>[1]> = {}) => {
    const written = await step('writeStatus', `status: ${verdict.kind}`, ref, { generation, verdict, ...extra });
    setPhase(written.phase);
    return written;
  };

  async function round(): Promise<RoundOutcome & { nextCheckSeconds: number }> {
    const n = ++state.rounds;
    const outcome = (fields: Partial<RoundOutcome>, next = cfg.driftCheckSeconds) => ({
      round: n, phase: state.phase, conditions: [], changes: [], finished: false, ...fields, nextCheckSeconds: next,
    });
    const snap = await step('readModel', `read MachineModel ${label}`, key);
    if (!snap) return outcome({ finished: true, message: `MachineModel ${label} no longer exists` });

    const { ref, generation } = snap;
    if (state.uid !== ref.uid) {
      // First sight, or a new object of the same name: the previous one is gone and so is its progress.
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
        const w = await writeStatus(ref, generation, { kind: 'failed', reason: 'InvalidSpec', message: snap.specErrors.join('; ') });
        return outcome({ changes, conditions: w.conditions, message: 'invalid spec: waiting for it to change' });
      }
      const applied = await step('applyChildren', 'apply Deployment, Service, HPA', snap);
      changes.push(...applied.changes);
      const readiness = await step('observeReadiness', 'observe readiness', ref);
      const decision = decideProgress(state, isReady(readiness), Date.now(), cfg);
      state.progressStartedAt = decision.progressStartedAt;
      state.notReadyChecks = decision.notReadyChecks;
      const w = await writeStatus(ref, generation, decision.verdict, {
        readiness,
        inferenceURL: applied.inferenceURL,
        selector: applied.selector,
      });
      return outcome({ changes, conditions: w.conditions }, decision.nextCheckSeconds);
    } catch (err) {
      const failure = failureOf(err);
      if (!failure) throw err;
      const w = await writeStatus(ref, generation, { kind: 'failed', ...failure });
      return outcome({ changes, conditions: w.conditions, message: failure.message });
    }
  }

  let roundsThisRun = 0;
  for (;;) {
    if (!dirty) {
      await condition(() => dirty, `${nextCheckSeconds} seconds`, {
        summary: state.phase === 'Ready' ? 'idle: wait for a change or the drift check' : 'wait for readiness or a change',
      });
    }
    const sinceLast = Date.now() - lastRoundEndedAt;
    if (sinceLast < cfg.minRoundIntervalMs) {
      await sleep(cfg.minRoundIntervalMs - sinceLast, { summary: 'rate limit: let a burst of changes coalesce' });
    }
    dirty = false;
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
      if (dirty) {
        // Something happened to the name after we looked (a new object of the same name): start clean.
        await condition(allHandlersFinished);
        return continueAsNew<typeof machineModelWorkflow>({ namespace: key.namespace, name: key.name, config: input.config });
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
