// A canary rollout of one new model revision, as a durable workflow. Started by the model's workflow;
// every decision is src/core/rollout-machine.ts (a pure state machine: state and event in, the next
// command out), every wait a durable timer. The rollout owns time and verdicts only: it writes
// nothing. It asks the model's workflow for the canary's size and share (its report signal), and the
// model's round, the only writer of the canary and the route, answers with the share it set; the
// rollout reads the canary's health and the gateway's counters itself. People's promote, abort, pause
// and resume are updates that answer at once with the rollout's view. docs/rollouts.md tells the design.
import { ApplicationFailure } from '@temporalio/common';
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
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
  type MachineCommand,
  type MachineEvent,
  type MachineInput,
  type MachineState,
  type PersonCommand,
} from '../src/core/rollout-machine.js';
import type { CanaryWant } from '../src/core/canary-state.js';
import type { CanaryHealth, TrafficSample } from '../src/core/rollout.js';
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
  const { ref, revision } = input;
  const label = `${ref.namespace}/${ref.name}`;
  const machine: MachineInput = {
    plan: input.plan,
    stableReplicas: input.stableReplicas,
    checkSeconds: input.checkSeconds ?? 30,
    readyDeadlineSeconds: input.readyDeadlineSeconds ?? 600,
  };
  let state: MachineState = input.resumed?.state ?? initialState();
  const startedAt = input.resumed?.startedAt ?? workflowInfo().startTime.getTime();
  /** Workflow time since the rollout (its first run) started. */
  const runSeconds = () => (Date.now() - startedAt) / 1000;
  // The model's workflow that started this rollout (kept across continue-as-new by the server, not
  // taken from the input: a forged input cannot make it report to another model's workflow).
  const parentWorkflowId: string =
    workflowInfo().parent?.workflowId ??
    // Nobody would carry out its asks: a rollout started by hand (or forged) ends at once.
    fail(`a rollout runs only as its model's workflow's child (${label})`);
  // Names this rollout in its reports: the model's workflow takes only those of the run it started.
  const sender = { workflowId: workflowInfo().workflowId, firstRunId: workflowInfo().firstExecutionRunId };
  /** What this rollout last asked of the model's round, and the round's last answer. */
  let want: CanaryWant | undefined = input.resumed?.want;
  let answered: { seq: number; weight: number } | undefined;
  const firstStep = state.step;
  /** Counts people's commands: a hold wakes when it changes. */
  let commands = 0;

  const view = (): RolloutView => {
    const s = state;
    const ended = s.stage.kind === 'ended' || s.stage.kind === 'ending' ? s.stage.ending.outcome : undefined;
    const left = pauseSecondsLeft(s, Date.now());
    const runningPause = s.stage.kind === 'holding' && s.stage.pauseEndsAt !== undefined && !s.paused;
    return {
      revision,
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
  };
  const details = () => {
    const v = view();
    setCurrentDetails(
      `**${label}** rollout of \`${revision.image}\` (${revision.modelPath}) · **${v.phase}**` +
        ` · step ${v.step} of ${v.steps} · canary ${v.weight}%` +
        (v.message ? `\n\n${v.message}` : ''),
    );
  };

  const refuseWhenFinished = (_cmd: RolloutCommand) => {
    if (hasEnded(state)) throw new Error(`the rollout of ${label} has ended (${view().phase})`);
  };
  const onCommand = (command: PersonCommand) => (cmd: RolloutCommand) => {
    state = personCommand(state, command, cmd.by ?? 'a person', Date.now());
    commands++;
    return view();
  };
  setHandler(rolloutStateQuery, view);
  // Only the answer to its own current ask counts: an answer to an older one, or a forged one, does not.
  setHandler(canaryAnsweredSignal, (a) => {
    if (a.seq === want?.seq) answered = a;
  });
  setHandler(promoteUpdate, onCommand('promote'), { validator: refuseWhenFinished });
  setHandler(abortUpdate, onCommand('abort'), { validator: refuseWhenFinished });
  setHandler(pauseUpdate, onCommand('pause'), { validator: refuseWhenFinished });
  setHandler(resumeUpdate, onCommand('resume'), { validator: refuseWhenFinished });

  /** Tells the model's workflow (status.rollout) when the step, the weight, the phase or the ask changed. */
  let reported = '';
  /** Workflow time of the last report sent. */
  let reportedAt = 0;
  async function report(result?: RolloutResult, again = false) {
    const v = view();
    const now = `${v.step}/${v.weight}/${v.phase}/${v.message ?? ''}/${want?.seq ?? 0}`;
    if (now === reported && !result && !again) return;
    reported = now;
    reportedAt = Date.now();
    await getExternalWorkflowHandle(parentWorkflowId).signal(rolloutReportSignal, {
      from: sender,
      view: v,
      ...(want ? { want } : {}),
      ...(result ? { result } : {}),
    });
  }

  /** Asks the model's round for the canary's size or share at the current step. */
  async function ask(change: Partial<Pick<CanaryWant, 'replicas' | 'weight'>>): Promise<number> {
    const seq = (want?.seq ?? 0) + 1;
    want = { replicas: 0, weight: 0, ...want, ...change, step: state.step, seq };
    await report();
    return seq;
  }

  /**
   * The share the model's round set for ask `seq`; asked again each minute it has not answered (a
   * round that ended early, on an invalid spec, answers none). A long wait continues as new, where
   * the same command asks again.
   */
  async function answerTo(seq: number, summary: string): Promise<number> {
    while (!(await condition(() => answered?.seq === seq, '1 minute', { summary }))) {
      if (runAgeSeconds() >= maxRunSeconds || workflowInfo().continueAsNewSuggested) await continueRun();
      await report(undefined, true);
    }
    return answered!.weight;
  }

  /** Carries out one command; what happened, as the machine's event. `seen` counts the commands people gave before it was decided. */
  async function perform(
    command: Exclude<MachineCommand, { do: 'finish' }>,
    seen: number,
  ): Promise<MachineEvent | undefined> {
    switch (command.do) {
      case 'look': {
        if (want?.replicas !== command.replicas || want.step !== state.step)
          await ask({ replicas: command.replicas, weight: state.weight });
        // Level-triggered: an ask the round has not answered (lost, or the round ended early) is made
        // again at a look a minute or more after the last report, as answerTo does for a share.
        else if (patched(lookAsksAgain) && answered?.seq !== want.seq && Date.now() - reportedAt >= 60_000)
          await report(undefined, true);
        const [health, traffic] = await Promise.all([
          step('canaryHealth', `look at the canary of ${label}: ${command.replicas} × ${revision.image}`, {
            ref,
            revision,
            replicas: command.replicas,
          }) as Promise<CanaryHealth>,
          command.withTraffic ? readTraffic() : undefined,
        ]);
        return { kind: 'looked', at: Date.now(), health, ...(traffic ? { traffic } : {}) };
      }
      case 'count': {
        const traffic = await readTraffic();
        return { kind: 'counted', at: Date.now(), ...(traffic ? { traffic } : {}) };
      }
      case 'set-weight': {
        const what =
          command.weight > 0
            ? `send ${command.weight}% of ${label}'s requests to the canary`
            : `send all of ${label}'s requests to the stable revision`;
        const set = await answerTo(await ask({ weight: command.weight }), `${what}: the model's round sets it`);
        // The round gives no share to a canary it finds unable to carry it; none is always given.
        return set === command.weight || command.weight === 0
          ? { kind: 'weight-set', at: Date.now() }
          : { kind: 'weight-refused', at: Date.now() };
      }
      case 'remove':
        // The model's round removes the canary once it has this rollout's result.
        return { kind: 'removed', at: Date.now() };
      case 'hold': {
        details();
        await report();
        // A person's command since the decision (during the report, too) ends the hold at once.
        const acted = () => commands !== seen;
        // A wait for a person lasts at most until the run is due to continue as new.
        const seconds = command.seconds ?? Math.max(1, maxRunSeconds - runAgeSeconds());
        const woken = await condition(acted, `${seconds} seconds`, { summary: command.summary });
        // Nobody came: the next run waits on; nothing happened for the machine to decide on.
        if (!woken && command.seconds === undefined) return undefined;
        return { kind: 'woke', at: Date.now() };
      }
    }
  }
  const readTraffic = (): Promise<TrafficSample | undefined> =>
    step('canaryTraffic', "read the canary's requests on the gateway", { ref });

  const runAgeSeconds = () => (Date.now() - workflowInfo().runStartTime.getTime()) / 1000;
  /** At a step's start (each step its own run) or before a hold, once the run is old or long. */
  const dueToContinue = (command: MachineCommand) => {
    if (hasEnded(state)) return false;
    const stepStarts = state.step !== firstStep && state.stage.kind === 'readying' && command.do === 'look';
    const old = runAgeSeconds() >= maxRunSeconds || workflowInfo().continueAsNewSuggested;
    return stepStarts || (command.do === 'hold' && old);
  };

  /** The next run goes on from this state. */
  async function continueRun(): Promise<never> {
    await condition(allHandlersFinished);
    return continueAsNew<typeof canaryRolloutWorkflow>({
      ...input,
      resumed: { state, startedAt, ...(want ? { want } : {}) },
    });
  }

  /** Runs the machine from `decision` until it finishes; how it ended. */
  async function run(decision: Decision) {
    let { command } = decision;
    state = decision.state;
    let seen = commands;
    while (command.do !== 'finish') {
      if (dueToContinue(command)) await continueRun();
      const event = (await perform(command, seen)) ?? (await continueRun());
      ({ state, command } = decide(machine, state, event));
      seen = commands;
    }
    return command.ending;
  }

  let ending;
  try {
    ending = await run(
      input.resumed
        ? { state, command: commandFor(machine, state, Date.now()) }
        : decide(machine, state, { kind: 'start', at: Date.now() }),
    );
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled: a newer revision, or the model deleted. Nothing to undo: the model's round, which
    // cancelled it, gives this revision's canary no share and removes it.
    metrics.rolloutEnded('Cancelled', runSeconds());
    throw err;
  }
  state = { ...state, stage: { kind: 'ended', ending } };
  details();
  metrics.rolloutEnded(ending.outcome, runSeconds());
  const result: RolloutResult = {
    outcome: ending.outcome,
    ...(ending.check ? { check: ending.check } : {}),
    message: ending.message,
    revision,
    view: view(),
  };
  await report(result);
  return result;
}
