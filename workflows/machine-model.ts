// The reconcile loop of one MachineModel, as a durable workflow: its signals, waits and
// continue-as-new, and its rollouts' messages; each round it runs is model-round.ts (as kube-rs
// separates the Controller from `reconcile`). Orchestration only: every read and write is an activity
// (activities/); every decision is a pure function (src/core/).
//
// The reconcile contract (after controller-runtime's Reconciler and kube-rs's reconcile + error_policy):
// - A round is level-triggered and idempotent. It reads the current object and children and acts on
//   the difference; run again with nothing changed, it writes nothing. A signal only says "look again".
// - The finalizer table (src/core/lifecycle.ts) makes a round `apply` or `cleanup`. With a gateway,
//   apply adds the finalizer before anything outside the object's namespace is touched; without
//   one it adds none, so no deletion (nor a namespace's) waits on the operator.
// - cleanup may assume that the object is deleting or gone, that its children go with it through
//   their owner references, and that an earlier cleanup may have run in part: every step is
//   idempotent. It removes what lies outside the namespace (the gateway route), then the finalizer,
//   which stays for as long as the gateway has not confirmed.
// - A run completes after a cleanup (or gone) round. It continues as new instead when a signal may
//   concern a new object of the same name, after maxRoundsPerRun rounds, when the server suggests,
//   when its next wait would outlive the run's 12 hours, or when told to move to another queue of its
//   install; a round a reconcileNow waits for runs first.
// - Errors follow the failure vocabulary (src/core/failures.ts). A retryable one is retried inside its
//   activity with exponential backoff (1 s to 30 s, no limit): the round waits and the Web UI shows
//   the attempts. A terminal one ends the round with phase Failed, its reason and message, and nothing
//   retries it until a signal or the drift check. A terminating namespace is a deletion under way, not
//   a failure. Gateway steps have an attempt limit; their failures become a condition (see gateway.ts).
// - nextCheckSeconds is how long the workflow sleeps after a round unless a signal comes first: the
//   readiness backoff (2 s doubling to 60 s, never past the progress deadline) while a rollout
//   progresses, at most 30 s while the gateway is away, the drift check (10 hours, give or take a tenth) once settled.
import {
  allHandlersFinished,
  condition,
  makeContinueAsNewFunc,
  deprecatePatch,
  patched,
  proxySinks,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { WriteStatusInput } from '../activities/index.js';
import type { Round } from './model-round.js';
import type { ModelRef, Phase } from '../src/core/api.js';
import { defaultWorkflowConfig, jitteredSeconds, type WorkflowConfig } from '../src/core/reconcile-timing.js';
import { roundResultOf } from '../src/core/round-result.js';
import { phaseOf, type Verdict } from '../src/core/status.js';
import { isEchoOf } from '../src/core/watch-echoes.js';
import { mayMoveTo } from '../src/core/shards.js';
import { statusSummary, waitSummary } from '../src/core/step-summaries.js';
import {
  deletedSignal,
  moveSignal,
  type ReconcileHint,
  reconcileNowUpdate,
  reconcileSignal,
  resyncSignal,
  stateQuery,
  type CarriedState,
  type MachineModelWorkflowInput,
  type ReconcileSinks,
  type RoundOutcome,
  type WorkflowStateView,
} from './definitions.js';
import { modelGateway } from './gateway.js';
import { modelRound } from './model-round.js';
import type { PatchId } from './patches.js';
import { rolloutReportSignal, type RolloutReport } from './rollout-definitions.js';
import { hintOf, reportOf, uidOf } from '../src/core/signal-payloads.js';
import { ModelRollouts } from './rollouts.js';
import { phaseAttribute } from './search-attributes.js';
import { kubeStep } from './steps.js';

const moveToShardQueue: PatchId = 'move-to-shard-queue';
const answerBeforeContinue: PatchId = 'answer-before-continue';
const stableClock: PatchId = 'stable-clock';
/** A run's longest life: half the day docs/workflow-versioning.md asks between releases. */
const maxRunSeconds = 12 * 3600;

const { metrics } = proxySinks<ReconcileSinks>();

/** What the loop and the message handlers share. */
interface LoopState {
  /** A resync, a deletion or reconcileNow asked to look again since the last round started. */
  asked: boolean;
  /** One of those may concern another object of this name (or said nothing of which). */
  askedForeign: boolean;
  /** The watch events signalled since the last round started, each with whether it may concern another object. */
  events: { hint: ReconcileHint; foreign: boolean }[];
  roundInProgress: boolean;
  finished: boolean;
  /** The install's queue this model's workflow belongs on, when its shard's owner said it is not this one. */
  moveTo?: string;
  /**
   * The latest round a reconcileNow waits for. Its wake (`asked`) can be spent by a wait inside a
   * round (the gateway's), so a run about to move or continue as new looks here too.
   */
  awaitedRound: number;
}

/**
 * The watch events that call for a round: all but the echoes of the round's own writes. Each replica's
 * informer signals an echo, and one can arrive before the result of the step that wrote it, so events
 * are judged against the round's writes whenever the loop looks, not when they arrive.
 */
function changesSeen(state: CarriedState, loop: LoopState): LoopState['events'] {
  return loop.events.filter((e) => !isEchoOf(state.echoes, e.hint));
}

function wantsRound(state: CarriedState, loop: LoopState): boolean {
  return loop.asked || changesSeen(state, loop).length > 0;
}

function forgetWakes(loop: LoopState): void {
  loop.asked = false;
  loop.askedForeign = false;
  loop.events = [];
}

function handleMessages(state: CarriedState, loop: LoopState, view: () => WorkflowStateView, rollouts: ModelRollouts) {
  const foreign = (uid?: string) => !uid || uid !== state.uid;
  const ask = (uid?: string) => {
    state.signals++;
    loop.asked = true;
    if (foreign(uid)) loop.askedForeign = true;
  };
  // Payloads are read through src/core/signal-payloads.ts: a malformed one must not throw in a handler.
  setHandler(reconcileSignal, (raw) => {
    state.signals++;
    const hint = hintOf(raw) as ReconcileHint;
    loop.events.push({ hint, foreign: foreign(hint.uid) });
  });
  setHandler(resyncSignal, () => ask());
  setHandler(rolloutReportSignal, (raw) => {
    state.signals++;
    const report = reportOf<RolloutReport>(raw);
    if (report && rollouts.onReport(report)) loop.asked = true;
  });
  setHandler(deletedSignal, (raw) => ask(uidOf(raw)));
  setHandler(moveSignal, (request) => {
    const taskQueue = request?.taskQueue;
    // Guarded where it is taken, not where it acts: a run of 0.2.0 ignored the signal, and replays so.
    if (typeof taskQueue === 'string' && mayMoveTo(taskQueue, workflowInfo().taskQueue)) {
      deprecatePatch(moveToShardQueue);
      loop.moveTo = taskQueue;
    }
  });
  setHandler(stateQuery, view);
  setHandler(reconcileNowUpdate, async () => {
    // The answer must come from a round that starts after this request.
    const target = state.rounds + 1;
    loop.asked = true;
    loop.awaitedRound = Math.max(loop.awaitedRound, target);
    await condition(() => (state.lastOutcome?.round ?? 0) >= target || loop.finished);
    return state.lastOutcome!;
  });
}

/** One run of a model's workflow: what its loop, its rounds and its message handlers share. */
interface Run {
  input: MachineModelWorkflowInput;
  label: string;
  cfg: WorkflowConfig;
  state: CarriedState;
  loop: LoopState;
  /** What the last round saw and ran, for the Web UI's summaries and current details. */
  seen: { readiness?: string; image?: string };
  reconcile: () => Promise<Round>;
  nextCheckSeconds: number;
  roundsThisRun: number;
  clock: RoundClock;
}

/**
 * What the loop decides by. Workflow time (and the server's continue-as-new suggestion) read right
 * after a local activity is not the same in every execution of a task: the first worker to replay a
 * run after a restart can read the next task's. So the rate limit decides by events alone, and the
 * round's deadlines and the run's bounds read the time at wakes: the run's start, a signal or a timer
 * ending a wait (docs/workflow-versioning.md, "Workflow time").
 */
interface RoundClock {
  /**
   * The last wake's time and continue-as-new suggestion (a round starts at one, and no wake comes
   * until it ends: they are the round's too), and whether one came since the last round started.
   */
  wokeAt: number;
  suggested: boolean;
  woke: boolean;
  /** Whether this run decides so (patch stable-clock, from its start); a run of 0.3.0 read the time anywhere. */
  stable: boolean;
  /** The old path's reference: read as the last round ended. */
  lastRoundEndedAt: number;
}

/** A wake: its time and the server's suggestion are the ones every execution of the run sees. */
function wake(clock: RoundClock): void {
  clock.wokeAt = Date.now();
  clock.suggested = workflowInfo().continueAsNewSuggested;
  clock.woke = true;
}

export async function machineModelWorkflow(input: MachineModelWorkflowInput): Promise<RoundOutcome> {
  const run = startRun(input);
  const { state, loop } = run;
  for (;;) {
    const waitEnds = await waitForWork(run);
    if (loop.moveTo !== undefined && !pending(run)) await moveWhenQuiet(run, waitEnds);
    const outcome = await runRound(run);
    if (outcome.finished) return finish(run, outcome);
    if (dueToContinue(run)) {
      // A reconcileNow waiting for the next round would wait for it forever here: it runs first.
      if (!allHandlersFinished() && (pending(run) || roundAwaited(run))) {
        deprecatePatch(answerBeforeContinue);
        loop.asked = true;
        continue;
      }
      await condition(allHandlersFinished);
      return continueOnQueue(run)({ ...input, state, dirty: pending(run), nextCheckSeconds: run.nextCheckSeconds });
    }
  }
}

/** The run's state, its message handlers, and the round it runs with its steps. */
function startRun(input: MachineModelWorkflowInput): Run {
  const key = { namespace: input.namespace, name: input.name };
  const label = `${key.namespace}/${key.name}`;
  const configured: WorkflowConfig = { ...defaultWorkflowConfig, ...input.config };
  const cfg: WorkflowConfig = {
    ...configured,
    driftCheckSeconds: jitteredSeconds(configured.driftCheckSeconds, label),
  };
  const state: CarriedState = input.state ?? { notReadyChecks: 0, rounds: 0, signals: 0, runs: 0, echoes: [] };
  state.runs++;
  // Level-triggered: every run begins by looking, unless it continues a quiet predecessor.
  const loop: LoopState = {
    asked: input.dirty ?? true,
    askedForeign: false,
    events: [],
    roundInProgress: false,
    finished: false,
    awaitedRound: 0,
  };
  // A canary gets as long to become ready as the model itself.
  const rollouts = new ModelRollouts(state, cfg.progressDeadlineSeconds);
  const view = (): WorkflowStateView => ({
    ...state,
    ...key,
    pendingWork: wantsRound(state, loop),
    roundInProgress: loop.roundInProgress,
    config: cfg,
  });
  handleMessages(state, loop, view, rollouts);

  const seen: Run['seen'] = {};
  const setPhase = (phase: Phase | undefined) => {
    if (!phase || phase === state.phase) return;
    state.phase = phase;
    upsertSearchAttributes([{ key: phaseAttribute, value: phase }]);
  };
  const writeStatus = async (
    ref: ModelRef,
    generation: number,
    verdict: Verdict,
    extra: Partial<WriteStatusInput> = {},
    changes: string[] = [],
  ) => {
    const summary = statusSummary(state.phase, phaseOf(verdict, extra.readiness), extra.readiness, changes);
    const written = await kubeStep('writeStatus', summary, ref, { generation, verdict, ...extra });
    setPhase(written.phase);
    return written;
  };
  const waitForSignal = async (seconds: number, summary: string) => {
    forgetWakes(loop);
    await condition(() => wantsRound(state, loop), `${seconds} seconds`, { summary });
  };
  const gateway = modelGateway({ state, writeStatus, waitForSignal });
  const clock: RoundClock = {
    wokeAt: Date.now(),
    suggested: false,
    woke: true,
    // Decided at the run's first task, whose place in the history every execution agrees on.
    stable: patched(stableClock),
    lastRoundEndedAt: 0,
  };
  const now = () => (clock.stable ? clock.wokeAt : Date.now());
  const reconcile = modelRound({ key, cfg, state, rollouts, gateway, writeStatus, setPhase, now, seen });
  return {
    input,
    label,
    cfg,
    state,
    loop,
    seen,
    reconcile,
    nextCheckSeconds: input.nextCheckSeconds ?? 0,
    roundsThisRun: 0,
    clock,
  };
}

const pending = ({ state, loop }: Run) => wantsRound(state, loop);
/** A reconcileNow waits for a round not run yet: the run must not end before it. */
const roundAwaited = ({ state, loop }: Run) => loop.awaitedRound > state.rounds;
/** Continue as new on the queue a move asked for, if one came (else on its own). */
const continueOnQueue = ({ loop }: Run) =>
  makeContinueAsNewFunc<typeof machineModelWorkflow>({ taskQueue: loop.moveTo });

/** Sleeps until a signal asks for a round, a move comes, or the next check is due; when that wait was to end. */
async function waitForWork(run: Run): Promise<number> {
  const { state, loop, seen, nextCheckSeconds } = run;
  let waitEnds = Date.now();
  if (!pending(run)) {
    waitEnds += nextCheckSeconds * 1000;
    await condition(() => pending(run) || loop.moveTo !== undefined, `${nextCheckSeconds} seconds`, {
      summary: waitSummary(state.phase, nextCheckSeconds, seen.readiness),
    });
    wake(run.clock);
  }
  return waitEnds;
}

/**
 * Its shard's worker does the rest of the wait, and the rounds after. A round asked for first (a
 * reconcileNow waits for one) runs here, and the move waits for the next quiet pass.
 */
async function moveWhenQuiet(run: Run, waitEnds: number): Promise<void> {
  const { input, state, loop } = run;
  await condition(() => allHandlersFinished() || pending(run) || roundAwaited(run));
  if (roundAwaited(run)) loop.asked = true;
  if (pending(run)) return;
  await continueOnQueue(run)({
    ...input,
    state,
    dirty: false,
    nextCheckSeconds: Math.max(0, Math.ceil((waitEnds - Date.now()) / 1000)),
  });
}

const coalesceSummary = 'rate limit: let a burst of changes coalesce';

/**
 * The rate limit, by events: a round that follows the last without a wait (work came during it) lets
 * the burst coalesce for minRoundIntervalMs; one woken by a signal or a timer runs at once (the
 * informer sends a model at most one signal a second, src/informer/signaler.ts).
 */
async function coalesce({ cfg, clock }: Run): Promise<void> {
  if (!clock.woke && cfg.minRoundIntervalMs > 0) {
    await sleep(cfg.minRoundIntervalMs, { summary: coalesceSummary });
    wake(clock);
  }
  clock.woke = false;
}

/** One round, rate-limited, counted, and told in the Web UI's current details. */
async function runRound(run: Run): Promise<RoundOutcome> {
  const { label, cfg, state, loop, seen, clock } = run;
  if (clock.stable) await coalesce(run);
  else {
    const sinceLast = Date.now() - clock.lastRoundEndedAt;
    if (sinceLast < cfg.minRoundIntervalMs)
      await sleep(cfg.minRoundIntervalMs - sinceLast, { summary: coalesceSummary });
  }
  forgetWakes(loop);
  loop.roundInProgress = true;
  metrics.roundStarted();
  const { nextCheckSeconds, requeued, ...outcome } = await run.reconcile();
  metrics.roundFinished(roundResultOf({ ...outcome, requeued }));
  loop.roundInProgress = false;
  clock.lastRoundEndedAt = Date.now();
  run.nextCheckSeconds = nextCheckSeconds;
  state.lastOutcome = outcome;
  setCurrentDetails(
    `**${label}** phase **${state.phase ?? 'unknown'}**` +
      (seen.readiness ? ` · ${seen.readiness}` : '') +
      (seen.image ? ` · image \`${seen.image}\`` : '') +
      ` · round ${outcome.round}` +
      (outcome.changes.length ? ` · ${outcome.changes.join(', ')}` : '') +
      (outcome.message ? `\n\n${outcome.message}` : ''),
  );
  return outcome;
}

/** After a cleanup (or gone) round: the run completes, or starts clean for a new object of the name. */
async function finish(run: Run, outcome: RoundOutcome): Promise<RoundOutcome> {
  const { input, state, loop } = run;
  // Signals about the object just finished (its own finalizer removal, its deletion) need no new run.
  if (loop.askedForeign || changesSeen(state, loop).some((e) => e.foreign)) {
    // Something happened to the name after we looked (a new object of the same name): start clean.
    // A reconcileNow waiting for the next round gets this one's: the object it asked about is gone.
    if (!allHandlersFinished()) {
      deprecatePatch(answerBeforeContinue);
      loop.finished = true;
    }
    await condition(allHandlersFinished);
    return continueOnQueue(run)({ namespace: input.namespace, name: input.name, config: input.config });
  }
  loop.finished = true;
  await condition(allHandlersFinished);
  return outcome;
}

/**
 * After maxRoundsPerRun rounds, when the server suggests, or when the next wait would outlive the
 * run's bound. Runs stay short whatever the drift-check period, so that every run open at an upgrade
 * was started by the release before it (docs/workflow-versioning.md): a run whose next wait would take
 * it past the bound continues as new first, and the new run does the waiting.
 */
function dueToContinue(run: Run): boolean {
  const { clock } = run;
  const now = clock.stable ? clock.wokeAt : Date.now();
  const suggested = clock.stable ? clock.suggested : workflowInfo().continueAsNewSuggested;
  const wouldOutliveRunBound = (waitSeconds: number) =>
    now - workflowInfo().runStartTime.getTime() + waitSeconds * 1000 > maxRunSeconds * 1000;
  if (++run.roundsThisRun >= run.cfg.maxRoundsPerRun || suggested) return true;
  return wouldOutliveRunBound(run.nextCheckSeconds);
}
