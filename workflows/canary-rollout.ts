// A canary rollout of one new model revision, as a durable workflow. Started by the model's workflow;
// every decision is src/core/rollout-machine.ts (a pure state machine: state and event in, the next
// command out), every wait a durable timer. The rollout owns time and verdicts only: it writes
// nothing. It asks the model's workflow for the canary's size and share (its report signal), and the
// model's round, the only writer of the canary and the route, answers with the share it set; the
// rollout reads the canary's health and the gateway's counters itself. People's promote, abort, pause
// and resume are updates that answer at once with the rollout's view. docs/rollouts.md tells the design.
//
// Read top to bottom: `canaryRolloutWorkflow` is the story (set up the run, set its handlers, run the
// machine, report the end). Then the run's state (`RolloutRun`, which every function here takes), its
// view and handlers; the machine's loop (`runMachine`, and `end` once it finishes) and `perform`, which
// carries out each command (`look`, `count`, `setWeight`, `hold`); the ask and the answer (`ask`,
// `answerTo`, `report`); and when a run continues as new (`dueToContinue`, `continueRun`).
import { ApplicationFailure } from '@temporalio/common';
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  deprecatePatch,
  getExternalWorkflowHandle,
  isCancellation,
  proxySinks,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  commandFor,
  decide,
  hasEnded,
  initialState,
  pauseSecondsLeft,
  personCommand,
  type Decision,
  type Ending,
  type MachineCommand,
  type MachineEvent,
  type MachineInput,
  type MachineState,
  type PersonCommand,
} from '../src/core/rollout-machine.js';
import { answerOf } from '../src/core/signal-payloads.js';
import type { CanaryWant } from '../src/core/canary-state.js';
import type { CanaryHealth, TrafficSample } from '../src/core/rollout.js';
import type { ReportSender } from '../src/core/rollout-reports.js';
import {
  abortUpdate,
  canaryAnsweredSignal,
  pauseUpdate,
  promoteUpdate,
  resumeUpdate,
  rolloutReportSignal,
  rolloutStateQuery,
  type CanaryRolloutInput,
  type RolloutCommand,
  type RolloutResult,
  type RolloutView,
} from './rollout-definitions.js';
import type { ReconcileSinks } from './definitions.js';
import type { PatchId } from './patches.js';
import { step } from './steps.js';

const lookAsksAgain: PatchId = 'look-asks-again';

const { metrics } = proxySinks<ReconcileSinks>();

/**
 * A run continues as new before it gets older than this, at a step's start or in a hold: a rollout
 * that waits days for a person still has short runs, as the upgrade policy assumes
 * (docs/workflow-versioning.md).
 */
const maxRunSeconds = 6 * 3600;

function fail(message: string): never {
  throw ApplicationFailure.nonRetryable(message);
}

export async function canaryRolloutWorkflow(input: CanaryRolloutInput): Promise<RolloutResult> {
  const run = startRun(input);
  setHandlers(run);
  let ending: Ending;
  try {
    ending = await runMachine(run, firstDecision(run));
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled: a newer revision, or the model deleted. Nothing to undo: the model's round, which
    // cancelled it, gives this revision's canary no share and removes it.
    metrics.rolloutEnded('Cancelled', rolloutSeconds(run));
    throw err;
  }
  return end(run, ending);
}

/** One run of the rollout: what it started with, and where it has come to. Every function here takes it. */
interface RolloutRun {
  readonly input: CanaryRolloutInput;
  /** The model, as `namespace/name`. */
  readonly label: string;
  readonly machine: MachineInput;
  /** Workflow time the rollout (its first run) started. */
  readonly startedAt: number;
  /**
   * The model's workflow that started this rollout (kept across continue-as-new by the server, not
   * taken from the input: a forged input cannot make it report to another model's workflow).
   */
  readonly parentWorkflowId: string;
  /** Names this rollout in its reports: the model's workflow takes only those of the run it started. */
  readonly sender: ReportSender;
  /** The step this run started at: the start of any other continues as new. */
  readonly firstStep: number;
  /** The machine's state; people's commands change it too. */
  state: MachineState;
  /** What this rollout last asked of the model's round, and the round's last answer. */
  want: CanaryWant | undefined;
  answered: { seq: number; weight: number } | undefined;
  /** Counts people's commands: a hold wakes when it changes. */
  commands: number;
  /** What the last report told (step, weight, phase, message, ask): a report is sent when it changes. */
  reported: string;
  /** Workflow time of the last report sent. */
  reportedAt: number;
}

function startRun(input: CanaryRolloutInput): RolloutRun {
  const { ref } = input;
  const label = `${ref.namespace}/${ref.name}`;
  const state = input.resumed?.state ?? initialState();
  const info = workflowInfo();
  return {
    input,
    label,
    machine: {
      plan: input.plan,
      stableReplicas: input.stableReplicas,
      checkSeconds: input.checkSeconds ?? 30,
      readyDeadlineSeconds: input.readyDeadlineSeconds ?? 600,
    },
    startedAt: input.resumed?.startedAt ?? info.startTime.getTime(),
    parentWorkflowId:
      info.parent?.workflowId ??
      // Nobody would carry out its asks: a rollout started by hand (or forged) ends at once.
      fail(`a rollout runs only as its model's workflow's child (${label})`),
    sender: { workflowId: info.workflowId, firstRunId: info.firstExecutionRunId },
    firstStep: state.step,
    state,
    want: input.resumed?.want,
    answered: undefined,
    commands: 0,
    reported: '',
    reportedAt: 0,
  };
}

/** Workflow time since the rollout (its first run) started. */
const rolloutSeconds = (run: RolloutRun) => (Date.now() - run.startedAt) / 1000;

/** Workflow time since this run started. */
const runAgeSeconds = () => (Date.now() - workflowInfo().runStartTime.getTime()) / 1000;

/** What the rollout's query, its updates and its reports tell. */
function viewOf({ input, state: s }: RolloutRun): RolloutView {
  const ended = s.stage.kind === 'ended' || s.stage.kind === 'ending' ? s.stage.ending.outcome : undefined;
  const left = pauseSecondsLeft(s, Date.now());
  const runningPause = s.stage.kind === 'holding' && s.stage.pauseEndsAt !== undefined && !s.paused;
  return {
    revision: input.revision,
    stable: input.stable,
    phase: ended ?? (s.paused ? 'Paused' : 'Progressing'),
    step: s.step + 1,
    steps: input.plan.steps.length,
    weight: s.weight,
    ...(s.paused ? { pausedBy: s.paused } : {}),
    ...(left !== undefined && !ended ? { pauseSecondsLeft: left } : {}),
    ...(runningPause && s.stage.kind === 'holding'
      ? { pauseEndsAt: new Date(s.stage.pauseEndsAt!).toISOString() }
      : {}),
    verdicts: [...s.notes],
    ...(s.message ? { message: s.message } : {}),
  };
}

/** The Web UI's current details. */
function showDetails(run: RolloutRun): void {
  const { label, input } = run;
  const v = viewOf(run);
  setCurrentDetails(
    `**${label}** rollout of \`${input.revision.image}\` (${input.revision.modelPath}) · **${v.phase}**` +
      ` · step ${v.step} of ${v.steps} · canary ${v.weight}%` +
      (v.message ? `\n\n${v.message}` : ''),
  );
}

/** The view query, the round's answer, and people's promote, abort, pause and resume. */
function setHandlers(run: RolloutRun): void {
  const refuseWhenFinished = (_cmd: RolloutCommand) => {
    if (hasEnded(run.state)) throw new Error(`the rollout of ${run.label} has ended (${viewOf(run).phase})`);
  };
  const onCommand = (command: PersonCommand) => (cmd: RolloutCommand) => {
    run.state = personCommand(run.state, command, cmd.by ?? 'a person', Date.now());
    run.commands++;
    return viewOf(run);
  };
  setHandler(rolloutStateQuery, () => viewOf(run));
  // Only the answer to its own current ask counts: an answer to an older one, or a forged one, does not.
  setHandler(canaryAnsweredSignal, (raw) => {
    const a = answerOf(raw);
    if (a && a.seq === run.want?.seq) run.answered = a;
  });
  setHandler(promoteUpdate, onCommand('promote'), { validator: refuseWhenFinished });
  setHandler(abortUpdate, onCommand('abort'), { validator: refuseWhenFinished });
  setHandler(pauseUpdate, onCommand('pause'), { validator: refuseWhenFinished });
  setHandler(resumeUpdate, onCommand('resume'), { validator: refuseWhenFinished });
}

/** The machine's first decision: a new rollout starts; a continued one goes on from its state. */
function firstDecision({ input, machine, state }: RolloutRun): Decision {
  return input.resumed
    ? { state, command: commandFor(machine, state, Date.now()) }
    : decide(machine, state, { kind: 'start', at: Date.now() });
}

/** Runs the machine from `decision` until it finishes; how it ended. */
async function runMachine(run: RolloutRun, decision: Decision): Promise<Ending> {
  let { command } = decision;
  run.state = decision.state;
  let seen = run.commands;
  while (command.do !== 'finish') {
    if (dueToContinue(run, command)) await continueRun(run);
    const event = (await perform(run, command, seen)) ?? (await continueRun(run));
    ({ state: run.state, command } = decide(run.machine, run.state, event));
    seen = run.commands;
  }
  return command.ending;
}

/** The rollout has ended: its details, its metric, and its result reported to the model's workflow. */
async function end(run: RolloutRun, ending: Ending): Promise<RolloutResult> {
  run.state = { ...run.state, stage: { kind: 'ended', ending } };
  showDetails(run);
  metrics.rolloutEnded(ending.outcome, rolloutSeconds(run));
  const result: RolloutResult = {
    outcome: ending.outcome,
    ...(ending.check ? { check: ending.check } : {}),
    message: ending.message,
    revision: run.input.revision,
    view: viewOf(run),
  };
  await report(run, result);
  return result;
}

type Command<Do extends MachineCommand['do']> = Extract<MachineCommand, { do: Do }>;

/** Carries out one command; what happened, as the machine's event. `seen` counts the commands people gave before it was decided. */
async function perform(
  run: RolloutRun,
  command: Exclude<MachineCommand, { do: 'finish' }>,
  seen: number,
): Promise<MachineEvent | undefined> {
  switch (command.do) {
    case 'look':
      return look(run, command);
    case 'count':
      return count(run);
    case 'set-weight':
      return setWeight(run, command);
    case 'remove':
      // The model's round removes the canary once it has this rollout's result.
      return { kind: 'removed', at: Date.now() };
    case 'hold':
      return hold(run, command, seen);
  }
}

/** Asks for the canary at this size (again, if the round has not answered), then reads its health. */
async function look(run: RolloutRun, command: Command<'look'>): Promise<MachineEvent> {
  const { ref, revision } = run.input;
  if (run.want?.replicas !== command.replicas || run.want.step !== run.state.step)
    await ask(run, { replicas: command.replicas, weight: run.state.weight });
  // Level-triggered: an ask the round has not answered (lost, or the round ended early) is made
  // again at a look a minute or more after the last report, as answerTo does for a share.
  else {
    deprecatePatch(lookAsksAgain);
    if (run.answered?.seq !== run.want.seq && Date.now() - run.reportedAt >= 60_000) await report(run, undefined, true);
  }
  const [health, traffic] = await Promise.all([
    step('canaryHealth', `look at the canary of ${run.label}: ${command.replicas} × ${revision.image}`, {
      ref,
      revision,
      replicas: command.replicas,
    }) as Promise<CanaryHealth>,
    command.withTraffic ? readTraffic(run) : undefined,
  ]);
  return { kind: 'looked', at: Date.now(), health, ...(traffic ? { traffic } : {}) };
}

async function count(run: RolloutRun): Promise<MachineEvent> {
  const traffic = await readTraffic(run);
  return { kind: 'counted', at: Date.now(), ...(traffic ? { traffic } : {}) };
}

const readTraffic = (run: RolloutRun): Promise<TrafficSample | undefined> =>
  step('canaryTraffic', "read the canary's requests on the gateway", { ref: run.input.ref });

/** Asks the model's round for the canary's share and waits for the share it set. */
async function setWeight(run: RolloutRun, command: Command<'set-weight'>): Promise<MachineEvent> {
  const { label } = run;
  const what =
    command.weight > 0
      ? `send ${command.weight}% of ${label}'s requests to the canary`
      : `send all of ${label}'s requests to the stable revision`;
  const set = await answerTo(run, await ask(run, { weight: command.weight }), `${what}: the model's round sets it`);
  // The round gives no share to a canary it finds unable to carry it; none is always given.
  return set === command.weight || command.weight === 0
    ? { kind: 'weight-set', at: Date.now() }
    : { kind: 'weight-refused', at: Date.now() };
}

/** Waits the pause out, or for a person; none when nobody came before the run is due to continue as new. */
async function hold(run: RolloutRun, command: Command<'hold'>, seen: number): Promise<MachineEvent | undefined> {
  showDetails(run);
  await report(run);
  // A person's command since the decision (during the report, too) ends the hold at once.
  const acted = () => run.commands !== seen;
  // A wait for a person lasts at most until the run is due to continue as new.
  const seconds = command.seconds ?? Math.max(1, maxRunSeconds - runAgeSeconds());
  const woken = await condition(acted, `${seconds} seconds`, { summary: command.summary });
  // Nobody came: the next run waits on; nothing happened for the machine to decide on.
  if (!woken && command.seconds === undefined) return undefined;
  return { kind: 'woke', at: Date.now() };
}

/** Asks the model's round for the canary's size or share at the current step. */
async function ask(run: RolloutRun, change: Partial<Pick<CanaryWant, 'replicas' | 'weight'>>): Promise<number> {
  const seq = (run.want?.seq ?? 0) + 1;
  run.want = { replicas: 0, weight: 0, ...run.want, ...change, step: run.state.step, seq };
  await report(run);
  return seq;
}

/**
 * The share the model's round set for ask `seq`; asked again each minute it has not answered (a
 * round that ended early, on an invalid spec, answers none). A long wait continues as new, where
 * the same command asks again.
 */
async function answerTo(run: RolloutRun, seq: number, summary: string): Promise<number> {
  while (!(await condition(() => run.answered?.seq === seq, '1 minute', { summary }))) {
    if (runAgeSeconds() >= maxRunSeconds || workflowInfo().continueAsNewSuggested) await continueRun(run);
    await report(run, undefined, true);
  }
  return run.answered!.weight;
}

/** Tells the model's workflow (status.rollout) when the step, the weight, the phase or the ask changed. */
async function report(run: RolloutRun, result?: RolloutResult, again = false): Promise<void> {
  const v = viewOf(run);
  const now = `${v.step}/${v.weight}/${v.phase}/${v.message ?? ''}/${run.want?.seq ?? 0}`;
  if (now === run.reported && !result && !again) return;
  run.reported = now;
  run.reportedAt = Date.now();
  await getExternalWorkflowHandle(run.parentWorkflowId).signal(rolloutReportSignal, {
    from: run.sender,
    view: v,
    ...(run.want ? { want: run.want } : {}),
    ...(result ? { result } : {}),
  });
}

/** At a step's start (each step its own run) or before a hold, once the run is old or long. */
function dueToContinue({ state, firstStep }: RolloutRun, command: MachineCommand): boolean {
  if (hasEnded(state)) return false;
  const stepStarts = state.step !== firstStep && state.stage.kind === 'readying' && command.do === 'look';
  const old = runAgeSeconds() >= maxRunSeconds || workflowInfo().continueAsNewSuggested;
  return stepStarts || (command.do === 'hold' && old);
}

/** The next run goes on from this state (as it is once the handlers have finished). */
async function continueRun(run: RolloutRun): Promise<never> {
  await condition(allHandlersFinished);
  const { input, state, startedAt, want } = run;
  return continueAsNew<typeof canaryRolloutWorkflow>({
    ...input,
    resumed: { state, startedAt, ...(want ? { want } : {}) },
  });
}
