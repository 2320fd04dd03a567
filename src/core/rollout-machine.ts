// The decisions of a canary rollout as one pure state machine: the state and what just happened in,
// the new state and the one thing to do next out. workflows/canary-rollout.ts only carries out each
// command (an activity, a durable timer) and feeds its result back; a property-based test
// (test/unit/rollout-machine.test.ts) drives the same function through generated interleavings of
// readiness flapping, errors, people's commands and cancellation. Pure and workflow-safe.
//
// A step: look at the canary, sized for the step, until it is ready (backing off up to 30 s; the
// Ready check fails at the ready deadline); give it the step's weight; read the gateway's counters;
// hold for the pause in looks `checkSeconds` apart, judging at every look (docs/rollouts.md's verdict
// table); at the end of the pause judge the step. A canary found with fewer ready replicas than its
// weight needs loses its share at once, and the step starts over once it is ready again, one ready
// deadline for all its tries. A paused rollout goes on looking, so this holds while it waits for a
// person too. The weight is never above the current step's.
import {
  addTraffic,
  canaryReplicas,
  durationSeconds,
  judgeCanary,
  type CanaryHealth,
  type CanaryVerdict,
  type TrafficSample,
} from './rollout.js';
import type {
  Decision,
  Ending,
  MachineCommand,
  MachineEvent,
  MachineInput,
  MachineState,
  PersonCommand,
  Stage,
} from './rollout-machine-types.js';

// The machine's words, for those who drive it (the rollout's workflow, mmctl, the tests).
export type * from './rollout-machine-types.js';

const keptNotes = 10;
const readinessCheckMaxSeconds = 30;

export const initialState = (): MachineState => ({
  step: 0,
  stage: { kind: 'readying', since: 0, wait: 2, looking: false },
  weight: 0,
  asked: { promote: false, abort: false },
  notes: [],
});

const noted = (s: MachineState, line: string): MachineState => ({ ...s, notes: [...s.notes, line].slice(-keptNotes) });

export const hasEnded = (s: MachineState) => s.stage.kind === 'ending' || s.stage.kind === 'ended';

/** The step in verdicts: "step 2 (50%)". */
export const stepLabel = (input: MachineInput, s: MachineState) =>
  `step ${s.step + 1} (${input.plan.steps[s.step]!.weight}%)`;

const stepWeight = (input: MachineInput, s: MachineState) => input.plan.steps[s.step]!.weight;
const pauseSecondsOf = (input: MachineInput, s: MachineState) => {
  const pause = input.plan.steps[s.step]!.pause;
  return pause ? durationSeconds(pause)! : 0;
};

/** Seconds left in the running pause (frozen while paused), or undefined outside one. */
export function pauseSecondsLeft(s: MachineState, at: number): number | undefined {
  if (s.stage.kind !== 'holding') return undefined;
  if (s.stage.frozenMs !== undefined) return Math.ceil(s.stage.frozenMs / 1000);
  if (s.stage.pauseEndsAt === undefined) return undefined;
  return Math.max(0, Math.ceil((s.stage.pauseEndsAt - at) / 1000));
}

function pauseFor(s: MachineState, by: 'person' | 'analysis', why: string, at: number): MachineState {
  const stage =
    s.stage.kind === 'holding' && s.stage.pauseEndsAt !== undefined
      ? { ...s.stage, frozenMs: Math.max(0, s.stage.pauseEndsAt - at), pauseEndsAt: undefined }
      : s.stage;
  return noted({ ...s, stage, paused: by, message: why }, why);
}

/** A person's command, applied at once as the update answers; promote and abort act at the next decision. */
export function personCommand(s: MachineState, command: PersonCommand, by: string, at: number): MachineState {
  switch (command) {
    case 'promote':
      return noted({ ...s, asked: { ...s.asked, promote: true } }, `promotion asked by ${by}`);
    case 'abort':
      return noted({ ...s, asked: { ...s.asked, abort: true } }, `abort asked by ${by}`);
    case 'pause':
      return s.paused ? s : pauseFor(s, 'person', `paused by ${by}`, at);
    case 'resume': {
      if (!s.paused) return s;
      const stage =
        s.stage.kind === 'holding' && s.stage.frozenMs !== undefined
          ? { ...s.stage, pauseEndsAt: at + s.stage.frozenMs, frozenMs: undefined }
          : s.stage;
      // A person's resume gives the canary a whole ready deadline, and its restarts, again.
      const renewed = stage.kind === 'readying' ? { ...stage, since: at } : stage;
      const resumed = {
        ...s,
        stage: renewed,
        paused: undefined,
        message: undefined,
        unreadySince: undefined,
        unreadyMs: undefined,
        restarts: undefined,
      };
      return noted(resumed, `resumed by ${by}`);
    }
  }
}

/** The next thing to do in state `s` at time `at`. */
export function commandFor(input: MachineInput, s: MachineState, at: number): MachineCommand {
  const stage = s.stage;
  const watching = { do: 'hold' as const, seconds: input.checkSeconds, summary: 'paused: wait for a person' };
  switch (stage.kind) {
    case 'ended':
      return { do: 'finish', ending: stage.ending };
    case 'ending':
      if (!stage.withdrawn) return { do: 'set-weight', weight: 0 };
      if (!stage.removed) return { do: 'remove' };
      return { do: 'finish', ending: stage.ending };
    case 'asking':
      if (stage.looking)
        return { do: 'look', replicas: canaryReplicas(input.stableReplicas, s.weight), withTraffic: true };
      return s.weight > 0 ? watching : { do: 'hold', summary: 'wait for a person' };
    case 'weighting':
      return { do: 'set-weight', weight: stepWeight(input, s) };
    case 'unweighting':
      return { do: 'set-weight', weight: 0 };
    case 'readying':
      if (stage.looking) {
        const replicas = canaryReplicas(input.stableReplicas, stepWeight(input, s));
        return { do: 'look', replicas, withTraffic: s.weight > 0 };
      }
      if (s.paused) return s.weight > 0 ? watching : { do: 'hold', summary: 'paused: wait for a person' };
      return { do: 'hold', seconds: stage.wait, summary: `wait for the canary: ${s.message ?? 'not ready yet'}` };
    case 'holding': {
      if (!stage.counted) return { do: 'count' };
      if (stage.looking) {
        return { do: 'look', replicas: canaryReplicas(input.stableReplicas, stepWeight(input, s)), withTraffic: true };
      }
      if (s.paused) return watching;
      const left = pauseSecondsLeft(s, at) ?? 0;
      return {
        do: 'hold',
        seconds: Math.min(input.checkSeconds, left),
        summary: `${stepLabel(input, s)}: pause, ${left} s left`,
      };
    }
  }
}

/** The state after `event`, and the next command. `event.at` is the workflow's clock (ms). */
export function decide(input: MachineInput, s: MachineState, event: MachineEvent): Decision {
  const state = transition(input, s, event);
  return { state, command: commandFor(input, state, event.at) };
}

function end(s: MachineState, ending: Ending): MachineState {
  // Every ending gives the canary's share back to the stable revision, which served every request
  // before the rollout: a person's promotion of a canary that turned unready takes nothing unjudged,
  // and no newer revision inherits a share. A promoted canary's objects stay for the model's workflow,
  // which makes its revision stable and then removes them.
  const promoted = ending.outcome === 'Promoted';
  return {
    ...noted(s, ending.message),
    paused: undefined,
    message: ending.message,
    stage: { kind: 'ending', ending, withdrawn: false, removed: promoted },
  };
}

/** A person's promote or abort, taken at the first decision after it. */
function personEnding(s: MachineState): Ending | undefined {
  if (s.asked.abort) return { outcome: 'Aborted', message: 'aborted by a person' };
  if (s.asked.promote) return { outcome: 'Promoted', message: `promoted by a person at step ${s.step + 1}` };
  return undefined;
}

/** The step starts (again): look at the canary until it is ready. */
function readying(s: MachineState, at: number): MachineState {
  const stage: Stage = { kind: 'readying', since: s.unreadySince ?? at, wait: 2, looking: true };
  return { ...s, stage, seen: undefined, last: undefined };
}

/** The step passed: the next one, or promotion after the last. */
function nextStep(input: MachineInput, s: MachineState, at: number): MachineState {
  if (s.step + 1 >= input.plan.steps.length)
    return end(s, { outcome: 'Promoted', message: `every step passed (${input.plan.steps.length})` });
  return readying({ ...s, step: s.step + 1, unreadySince: undefined, unreadyMs: undefined, restarts: undefined }, at);
}

/** A failed check: roll back, or (onFailure: Pause) take the canary's share back and ask a person. */
function failed(
  input: MachineInput,
  s: MachineState,
  verdict: Extract<CanaryVerdict, { kind: 'failed' }>,
  at: number,
): MachineState {
  const why = `${stepLabel(input, s)}: ${verdict.message}`;
  if (input.plan.onFailure !== 'Pause')
    return end(s, { outcome: 'RolledBack', check: verdict.check, message: `rolled back at ${why}` });
  const asking = pauseFor(s, 'analysis', `${why}; paused for a person (onFailure: Pause)`, at);
  return { ...asking, stage: { kind: 'unweighting', then: 'ask' } };
}

/** Fewer ready replicas than its share needs: share back at once, and the step again once ready. */
function unready(input: MachineInput, s: MachineState, since: number, detail: string, at: number): MachineState {
  if (unreadyTooLong(input, s, since, at)) {
    const message = `canary not ready again within ${input.readyDeadlineSeconds} s: ${detail}`;
    return failed(input, { ...s, unreadySince: since }, { kind: 'failed', check: 'Ready', message }, at);
  }
  // A canary that keeps losing readiness would start its step over without end.
  const restarts = (s.restarts ?? 0) + 1;
  if (restarts > maxRestartsPerStep) {
    const message = `canary lost readiness ${restarts} times in this step: ${detail}`;
    return failed(input, { ...s, unreadySince: since }, { kind: 'failed', check: 'Ready', message }, at);
  }
  s = { ...s, restarts };
  const why = `${stepLabel(input, s)}: ${detail}; its share back to the stable revision, waiting again`;
  return { ...noted(s, why), unreadySince: since, message: detail, stage: { kind: 'unweighting', then: 'again' } };
}

/** Whether the canary has been unready longer than the deadline allows, this period and the earlier ones of the step. */
const unreadyTooLong = (input: MachineInput, s: MachineState, since: number, at: number) =>
  (s.unreadyMs ?? 0) + (at - since) >= input.readyDeadlineSeconds * 1000;

/** The step's requests with the gateway's new reading: the first reading is where counting starts. */
function counted(s: MachineState, traffic: TrafficSample | undefined): Pick<MachineState, 'seen' | 'last'> {
  if (!traffic) return { seen: s.seen, last: s.last };
  if (!s.last) return { seen: s.seen ?? { requests: 0, errors: 0 }, last: traffic };
  return { seen: addTraffic(s.seen ?? { requests: 0, errors: 0 }, s.last, traffic), last: traffic };
}

/** How many times a step may start over because its canary lost readiness, before it fails. */
export const maxRestartsPerStep = 3;

/** Whether the canary's ready replicas carry its current share. */
const carries = (input: MachineInput, s: MachineState, health: CanaryHealth) =>
  s.weight === 0 || health.readyReplicas >= canaryReplicas(input.stableReplicas, s.weight);

type StageOf<K extends Stage['kind']> = Extract<Stage, { kind: K }>;

/** The state after `event`: what holds in every stage first, then what the current stage makes of it. */
function transition(input: MachineInput, s: MachineState, event: MachineEvent): MachineState {
  const at = event.at;
  const stage = s.stage;
  if (stage.kind === 'ended') return s;
  if (stage.kind === 'ending') return whileEnding(s, stage, event);
  if (event.kind === 'weight-set') s = { ...s, weight: stage.kind === 'weighting' ? stepWeight(input, s) : 0 };
  if (event.kind === 'weight-refused' && stage.kind === 'weighting') {
    // The round found the canary unable to carry the step's share when it was to be given.
    return unready(input, s, s.unreadySince ?? at, 'not ready when its share was to be given', at);
  }
  const byPerson = personEnding(s);
  if (byPerson) return end(s, byPerson);
  if (event.kind === 'start') return readying(s, at);
  switch (stage.kind) {
    case 'readying':
      return whileReadying(input, s, stage, event);
    case 'weighting':
      return whileWeighting(input, s, event);
    case 'unweighting':
      return whileUnweighting(s, stage, event);
    case 'asking':
      return whileAsking(input, s, stage, event);
    case 'holding':
      return whileHolding(input, s, stage, event);
  }
}

/** Its share given back, then the canary removed: the ending waits for both. */
function whileEnding(s: MachineState, stage: StageOf<'ending'>, event: MachineEvent): MachineState {
  if (event.kind === 'weight-set') return { ...s, weight: 0, stage: { ...stage, withdrawn: true } };
  if (event.kind === 'removed') return { ...s, stage: { ...stage, removed: true } };
  return s;
}

/** Looking at the canary until it is ready to be given the step's weight. */
function whileReadying(
  input: MachineInput,
  s: MachineState,
  stage: StageOf<'readying'>,
  event: MachineEvent,
): MachineState {
  const at = event.at;
  if (event.kind === 'woke') {
    return { ...s, stage: { ...stage, looking: true, wait: Math.min(stage.wait * 2, readinessCheckMaxSeconds) } };
  }
  if (event.kind !== 'looked') return s;
  // With a share (the last step's, kept while the canary grows for this one) its errors count too.
  s = { ...s, ...counted(s, event.traffic) };
  const verdict = judgeCanary(input.plan.analysis, { ...event.health, traffic: s.seen }, false);
  if (verdict.kind === 'failed') return failed(input, s, verdict, at);
  // The last step's share goes when its Pods cannot carry it.
  if (!carries(input, s, event.health)) {
    const detail = verdict.kind === 'waiting' ? verdict.detail : 'not ready';
    return unready(input, s, stage.since, detail, at);
  }
  if (verdict.kind === 'waiting') {
    if (unreadyTooLong(input, s, stage.since, at)) {
      const message = `canary not ready within ${input.readyDeadlineSeconds} s: ${verdict.detail}`;
      return failed(input, s, { kind: 'failed', check: 'Ready', message }, at);
    }
    return { ...s, message: verdict.detail, stage: { ...stage, looking: false } };
  }
  if (s.paused) return { ...s, stage: { ...stage, looking: false } };
  // Ready again: the time it was not counts against the step's deadline, the time it is does not.
  const unreadyMs = s.unreadySince === undefined ? s.unreadyMs : (s.unreadyMs ?? 0) + (at - s.unreadySince);
  return { ...s, unreadySince: undefined, unreadyMs, message: undefined, stage: { kind: 'weighting' } };
}

/** The step's weight set: its pause begins. */
function whileWeighting(input: MachineInput, s: MachineState, event: MachineEvent): MachineState {
  if (event.kind !== 'weight-set') return s;
  const pauseEndsAt = event.at + pauseSecondsOf(input, s) * 1000;
  // Paused while the weight was set: the pause's time is frozen from its start.
  const holding: Stage = s.paused
    ? { kind: 'holding', counted: false, looking: false, frozenMs: pauseEndsAt - event.at }
    : { kind: 'holding', counted: false, looking: false, pauseEndsAt };
  return { ...s, stage: holding };
}

/** Its share taken back: a person asked, or the step again. */
function whileUnweighting(s: MachineState, stage: StageOf<'unweighting'>, event: MachineEvent): MachineState {
  if (event.kind !== 'weight-set') return s;
  // Resumed while its share was being taken back: the step again at once.
  return stage.then === 'ask' && s.paused
    ? { ...s, stage: { kind: 'asking', then: 'retry', looking: false } }
    : readying(s, event.at);
}

/** Waiting for a person, looking at a canary that keeps its share meanwhile. */
function whileAsking(
  input: MachineInput,
  s: MachineState,
  stage: StageOf<'asking'>,
  event: MachineEvent,
): MachineState {
  const at = event.at;
  if (event.kind === 'looked') {
    s = { ...s, ...counted(s, event.traffic) };
    const verdict = judgeCanary(input.plan.analysis, { ...event.health, traffic: s.seen }, false);
    if (verdict.kind === 'failed') return failed(input, s, verdict, at);
    if (!carries(input, s, event.health)) return unready(input, s, s.unreadySince ?? at, 'not ready', at);
    return { ...s, stage: { ...stage, looking: false } };
  }
  if (event.kind !== 'woke') return s;
  if (s.paused) return s.weight > 0 ? { ...s, stage: { ...stage, looking: true } } : s;
  // Resumed: the step accepted, or tried again from its start.
  return stage.then === 'next' ? nextStep(input, s, at) : readying(s, at);
}

/** The pause: the gateway's counters read, then a look at every wake, the step judged at its end. */
function whileHolding(
  input: MachineInput,
  s: MachineState,
  stage: StageOf<'holding'>,
  event: MachineEvent,
): MachineState {
  const at = event.at;
  if (event.kind === 'counted') {
    return {
      ...s,
      seen: event.traffic && { requests: 0, errors: 0 },
      last: event.traffic,
      stage: { ...stage, counted: true },
    };
  }
  if (event.kind === 'woke') return { ...s, stage: { ...stage, looking: true } };
  if (event.kind !== 'looked') return s;
  let { seen, last } = s;
  if (event.traffic) {
    seen = addTraffic(seen ?? { requests: 0, errors: 0 }, last, event.traffic);
    last = event.traffic;
  }
  s = { ...s, seen, last, stage: { ...stage, looking: false } };
  const endOfStep = !s.paused && (pauseSecondsLeft(s, at) ?? 0) <= 0;
  const health = { ...event.health, ...(seen ? { traffic: seen } : {}) };
  const verdict = judgeCanary(input.plan.analysis, health, endOfStep);
  if (verdict.kind === 'failed') return failed(input, s, verdict, at);
  if (verdict.kind === 'waiting') return unready(input, s, s.unreadySince ?? at, verdict.detail, at);
  if (!endOfStep) return s;
  if (verdict.kind === 'inconclusive') {
    const why = `${stepLabel(input, s)}: ${verdict.detail}; promote, resume or abort`;
    return { ...pauseFor(s, 'analysis', why, at), stage: { kind: 'asking', then: 'next', looking: false } };
  }
  return nextStep(input, noted(s, `${stepLabel(input, s)}: ${verdict.detail}`), at);
}
