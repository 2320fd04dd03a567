// A canary rollout of one new model revision, as a durable workflow. Started by the model's workflow;
// every decision is src/core/rollout-machine.ts (a pure state machine: state and event in, the next
// command out), every Kubernetes and gateway step an activity (activities/canary.ts), every wait a
// durable timer. This file only carries out the machine's commands and feeds their results back, and
// answers people: promote, abort, pause and resume are updates that answer at once with the rollout's
// view. docs/rollouts.md tells the design.
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  proxySinks,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  cancelled,
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
import type { CanaryHealth, TrafficSample } from '../src/core/rollout.js';
import {
  abortUpdate,
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
import { rolloutStep } from './steps.js';

const { metrics } = proxySinks<ReconcileSinks>();

/**
 * A run continues as new before it gets older than this, at a step's start or in a hold: a rollout
 * that waits days for a person still has short runs, as the upgrade policy assumes
 * (docs/workflow-versioning.md).
 */
const maxRunSeconds = 6 * 3600;

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
  const parentWorkflowId = input.resumed?.parentWorkflowId ?? workflowInfo().parent?.workflowId;
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
      phase: ended && ended !== 'Cancelled' ? ended : s.paused ? 'Paused' : 'Progressing',
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
  setHandler(promoteUpdate, onCommand('promote'), { validator: refuseWhenFinished });
  setHandler(abortUpdate, onCommand('abort'), { validator: refuseWhenFinished });
  setHandler(pauseUpdate, onCommand('pause'), { validator: refuseWhenFinished });
  setHandler(resumeUpdate, onCommand('resume'), { validator: refuseWhenFinished });

  /** Tells the model's workflow (status.rollout) when the step, the weight or the phase changed. */
  let reported = '';
  async function report(result?: RolloutResult) {
    const v = view();
    const now = `${v.step}/${v.weight}/${v.phase}/${v.message ?? ''}`;
    if (!parentWorkflowId || (now === reported && !result)) return;
    reported = now;
    await getExternalWorkflowHandle(parentWorkflowId).signal(rolloutReportSignal, { view: v, result });
  }

  /** Carries out one command; what happened, as the machine's event. `seen` counts the commands people gave before it was decided. */
  async function perform(
    command: Exclude<MachineCommand, { do: 'finish' }>,
    seen: number,
  ): Promise<MachineEvent | undefined> {
    switch (command.do) {
      case 'look': {
        const [health, traffic] = await Promise.all([
          rolloutStep('applyCanary', `canary of ${label}: ${command.replicas} × ${revision.image}`, {
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
        await rolloutStep('setCanaryWeight', what, { ref, weight: command.weight, revision });
        return { kind: 'weight-set', at: Date.now() };
      }
      case 'remove':
        await rolloutStep('removeCanary', `remove the canary of ${label}`, { ref, revision });
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
    rolloutStep('canaryTraffic', "read the canary's requests on the gateway", { ref });

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
      resumed: { state, startedAt, ...(parentWorkflowId ? { parentWorkflowId } : {}) },
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
    // Cancelled: a newer revision, or the model deleted. This revision's canary takes no more traffic
    // and goes; a newer revision's canary is not this rollout's to touch (activities/canary.ts).
    await CancellationScope.nonCancellable(() => {
      const withdrawing = cancelled(state);
      return run({ state: withdrawing, command: commandFor(machine, withdrawing, Date.now()) });
    });
    metrics.rolloutEnded('Cancelled', runSeconds());
    throw err;
  }
  if (ending.outcome === 'Cancelled') throw new Error('a rollout ends Cancelled only by cancellation');
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
