// The ask/answer exchange between a canary rollout and its model's round (docs/rollouts.md, "The ask
// and the answer"), with the operator restarted at every point of it. Each side acts in workflow
// tasks, as Temporal runs them: a task's activities act on the world when it runs (the model's round
// sets the canary and the route), while its state and the signals it sends are kept only when the
// task completes; a worker that dies before that loses them, and the task runs again from the last
// state kept, with the same messages. Signals are delivered in order, late or early. The rollout is
// src/core/rollout-machine.ts; the round's decisions are src/core/canary-state.ts; how the round takes
// a report and answers is workflows/rollouts.ts (`take`, `keepCanary`), mirrored here.
//
// Checked: after every step, the route gives a share only to the running rollout's canary, ready to
// carry it, never above its step's; after a restart anywhere, every rollout ends as it would have
// without it, with no ask left for a timer to make again (the rollout asks again after a minute
// without an answer, answerTo in workflows/canary-rollout.ts: recovery must not wait for it).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RolloutSpec } from '../../src/core/api.js';
import { canaryShare, canaryUpkeep, type CanaryWant, type RoundRollout } from '../../src/core/canary-state.js';
import {
  decide,
  initialState,
  type Ending,
  type MachineCommand,
  type MachineEvent,
  type MachineInput,
  type MachineState,
} from '../../src/core/rollout-machine.js';
import { canaryReplicas, revisionName, type Revision } from '../../src/core/rollout.js';

const revision: Revision = { image: 'registry.example/m:2', modelPath: '/m' };

type Report = { want?: CanaryWant; result?: Ending };
type Answer = { seq: number; weight: number };

/** What the rollout's workflow keeps between tasks (its history). */
interface RolloutKept {
  state: MachineState;
  command: MachineCommand;
  want?: CanaryWant;
  /** The ask a set-weight waits on. */
  awaiting?: number;
  answered?: Answer;
  clock: number;
}

/** What the model's workflow keeps between tasks: the rollout it follows. */
interface ModelKept {
  want?: CanaryWant;
  answered?: number;
  result?: Ending;
}

/** A task that ran but has not completed: its state and the signals it sends, kept only at completion. */
interface Pending<K> {
  kept: K;
  sends: unknown[];
  /** Messages of the inbox the task took. */
  took: number;
}

interface World {
  input: MachineInput;
  canary?: { revision: string; replicas: number };
  weight: number;
  readyFraction: 0 | 0.5 | 1;
  rollout: { kept: RolloutKept; pending?: Pending<RolloutKept>; inbox: Answer[] };
  model: { kept: ModelKept; pending?: Pending<ModelKept>; inbox: Report[] };
  toModel: Report[];
  toRollout: Answer[];
  /** Asks a rollout had to make again on its timer: an exchange left with nothing in flight. */
  stalls: number;
}

type Step =
  | 'rollout-run'
  | 'rollout-complete'
  | 'model-run'
  | 'model-complete'
  | 'deliver-report'
  | 'deliver-answer'
  | 'restart'
  | 'rollout-continue'
  | 'ready-0'
  | 'ready-1';

function newWorld(plan: RolloutSpec): World {
  const input: MachineInput = { plan, stableReplicas: 4, checkSeconds: 30, readyDeadlineSeconds: 600 };
  const first = decide(input, initialState(), { kind: 'start', at: 0 });
  return {
    input,
    weight: 0,
    readyFraction: 1,
    rollout: { kept: { state: first.state, command: first.command, clock: 0 }, inbox: [] },
    model: { kept: {}, inbox: [] },
    toModel: [],
    toRollout: [],
    stalls: 0,
  };
}

const live = (w: World) => w.canary && { ...w.canary, readyReplicas: Math.floor(w.canary.replicas * w.readyFraction) };

function holds(ok: boolean, invariant: string, seen?: unknown): void {
  if (!ok) throw new Error(`invariant broken: ${invariant}${seen === undefined ? '' : ` (${JSON.stringify(seen)})`}`);
}

/** The rollout's next task, from what it kept and the answers delivered; undefined when it has nothing to do. */
function rolloutTask(w: World): Pending<RolloutKept> | undefined {
  const k = structuredClone(w.rollout.kept);
  const sends: Report[] = [];
  let took = 0;
  const ask = (change: Partial<CanaryWant>) => {
    const seq = (k.want?.seq ?? 0) + 1;
    k.want = { replicas: 0, weight: 0, ...k.want, ...change, step: k.state.step, seq };
    sends.push({ want: k.want });
    return seq;
  };
  // Answers to older asks, or forged ones, count for nothing (canaryAnswered's handler).
  for (const a of w.rollout.inbox) {
    took++;
    if (a.seq === k.want?.seq) k.answered = a;
  }
  const c = k.command;
  let event: MachineEvent | undefined;
  k.clock += 1000;
  switch (c.do) {
    case 'finish':
      return undefined;
    case 'set-weight':
      if (k.awaiting === undefined) {
        k.awaiting = ask({ weight: c.weight });
        break;
      }
      if (k.answered?.seq !== k.awaiting) {
        if (took === 0) return undefined;
        break;
      }
      event = {
        kind: k.answered.weight === c.weight || c.weight === 0 ? 'weight-set' : 'weight-refused',
        at: k.clock,
      };
      k.awaiting = undefined;
      break;
    case 'look': {
      if (k.want?.replicas !== c.replicas || k.want.step !== k.state.step)
        ask({ replicas: c.replicas, weight: k.state.weight });
      const l = live(w);
      const ready = l && l.revision === revisionName(revision) ? Math.min(l.readyReplicas, c.replicas) : 0;
      event = { kind: 'looked', at: k.clock, health: { readyReplicas: ready, desiredReplicas: c.replicas } };
      break;
    }
    case 'count':
      event = { kind: 'counted', at: k.clock };
      break;
    case 'remove':
      event = { kind: 'removed', at: k.clock };
      break;
    case 'hold':
      k.clock += (c.seconds ?? 0) * 1000;
      event = { kind: 'woke', at: k.clock };
      break;
  }
  if (event) {
    const d = decide(w.input, k.state, event);
    k.state = d.state;
    k.command = d.command;
    if (d.command.do === 'finish') sends.push({ result: d.command.ending });
  }
  return { kept: k, sends, took };
}

/** The model's round: takes the reports delivered, sets the share and the canary (activities: at once), answers. */
function modelTask(w: World): Pending<ModelKept> | undefined {
  if (w.model.inbox.length === 0 && w.model.kept.want?.seq === w.model.kept.answered) return undefined;
  const k = structuredClone(w.model.kept);
  for (const r of w.model.inbox) {
    // The latest ask counts, answered again even if answered before (take in workflows/rollouts.ts).
    if (r.want && !k.result) {
      k.want = r.want;
      k.answered = undefined;
    }
    if (r.result) k.result = r.result;
  }
  const running: RoundRollout | undefined = k.result
    ? undefined
    : { revision, plan: w.input.plan, stableReplicas: w.input.stableReplicas, ...(k.want ? { want: k.want } : {}) };
  w.weight = canaryShare(running, live(w));
  checkRoute(w, running);
  const upkeep = canaryUpkeep(running, live(w), k.result?.outcome === 'Promoted');
  if (upkeep.do === 'apply') w.canary = { revision: revisionName(revision), replicas: upkeep.replicas };
  if (upkeep.do === 'remove') w.canary = undefined;
  const sends: Answer[] = [];
  if (running && k.want && k.answered !== k.want.seq) {
    sends.push({ seq: k.want.seq, weight: w.weight });
    k.answered = k.want.seq;
  }
  return { kept: k, sends, took: w.model.inbox.length };
}

function checkRoute(w: World, running: RoundRollout | undefined) {
  if (w.weight === 0) return;
  const l = live(w)!;
  holds(!!running, 'a share only while its rollout runs');
  holds(l.readyReplicas >= canaryReplicas(w.input.stableReplicas, w.weight), 'a share only on a ready canary', l);
  holds(w.weight <= w.input.plan.steps[running!.want!.step]!.weight, "a share never above its step's", w.weight);
}

/** A task completes: what it kept becomes the side's, the inbox loses what it took, its signals go out. */
function complete<K, In, Out>(side: { kept: K; pending?: Pending<K>; inbox: In[] }, channel: Out[]): void {
  const p = side.pending;
  if (!p) return;
  side.kept = p.kept;
  side.inbox.splice(0, p.took);
  channel.push(...(p.sends as Out[]));
  side.pending = undefined;
}

function apply(w: World, step: Step): void {
  switch (step) {
    case 'rollout-run':
      w.rollout.pending ??= rolloutTask(w);
      break;
    case 'rollout-complete':
      complete(w.rollout, w.toModel);
      break;
    case 'model-run':
      w.model.pending ??= modelTask(w);
      break;
    case 'model-complete':
      complete(w.model, w.toRollout);
      break;
    case 'deliver-report':
      if (w.toModel.length) w.model.inbox.push(w.toModel.shift()!);
      break;
    case 'deliver-answer':
      if (w.toRollout.length) w.rollout.inbox.push(w.toRollout.shift()!);
      break;
    case 'restart':
      // The worker dies: every task not completed is lost, to run again from what was kept.
      w.rollout.pending = undefined;
      w.model.pending = undefined;
      break;
    case 'rollout-continue':
      // Continued as new between tasks (at a step's start, or a long wait): the next run carries the
      // machine's state and its last ask, and asks again for a share it waits on (continueRun, answerTo).
      if (!w.rollout.pending) w.rollout.kept = { ...w.rollout.kept, answered: undefined, awaiting: undefined };
      break;
    case 'ready-0':
    case 'ready-1':
      w.readyFraction = step === 'ready-0' ? 0 : 1;
      break;
  }
}

/** Runs every side in turn, without faults, until the rollout ended and the model took its result. */
function settle(w: World): void {
  w.readyFraction = 1;
  for (let i = 0; i < 2_000; i++) {
    for (const s of [
      'deliver-report',
      'deliver-answer',
      'model-run',
      'model-complete',
      'rollout-run',
      'rollout-complete',
    ] as Step[])
      apply(w, s);
    const r = w.rollout.kept;
    if (r.command.do === 'finish' && w.model.kept.result && !w.toModel.length && !w.model.inbox.length) return;
    // Nothing in flight, nothing to do, and the rollout still waits for an answer: only its timer's ask
    // again would go on.
    const waits = r.command.do === 'set-weight' && r.awaiting !== undefined && r.answered?.seq !== r.awaiting;
    if (waits && !w.toModel.length && !w.toRollout.length && !w.model.inbox.length && !w.rollout.inbox.length) {
      w.stalls++;
      return;
    }
  }
  throw new Error('the exchange did not settle in 2,000 passes');
}

function play(plan: RolloutSpec, steps: Step[]): World {
  const w = newWorld(plan);
  for (const s of steps) apply(w, s);
  settle(w);
  return w;
}

const planArb: fc.Arbitrary<RolloutSpec> = fc
  .uniqueArray(fc.integer({ min: 1, max: 99 }), { minLength: 1, maxLength: 4 })
  .map((weights) => ({
    strategy: 'Canary' as const,
    steps: [...weights].sort((a, b) => a - b).map((weight) => ({ weight, pause: '30s' })),
  }));

const stepArb = fc.constantFrom<Step>(
  'rollout-run',
  'rollout-complete',
  'model-run',
  'model-complete',
  'deliver-report',
  'deliver-answer',
  'restart',
  'rollout-continue',
  'ready-0',
  'ready-1',
);

/** One exchange without faults, task by task: the points a restart can fall between. */
const exchange: Step[] = Array.from(
  { length: 12 },
  () =>
    ['rollout-run', 'rollout-complete', 'deliver-report', 'model-run', 'model-complete', 'deliver-answer'] as Step[],
).flat();

const outcome = (w: World) => ({
  ending: w.rollout.kept.command.do === 'finish' ? w.rollout.kept.command.ending.outcome : undefined,
  canary: w.canary?.revision,
  weight: w.weight,
  stalls: w.stalls,
});

describe('the ask and the answer under restarts', () => {
  it('ends every rollout as without the restart (or a continue-as-new), whichever point of the exchange it falls at', () => {
    const plan: RolloutSpec = {
      strategy: 'Canary',
      steps: [
        { weight: 20, pause: '5s' },
        { weight: 50, pause: '5s' },
      ],
    };
    const plain = outcome(play(plan, exchange));
    expect(plain).toEqual({ ending: 'Promoted', canary: revisionName(revision), weight: 0, stalls: 0 });
    for (let at = 0; at <= exchange.length; at++) {
      for (const fault of ['restart', 'rollout-continue'] as const) {
        const faulted = [...exchange.slice(0, at), fault, ...exchange.slice(at)];
        expect(outcome(play(plan, faulted)), `${fault} after ${exchange.slice(0, at).join(' ')}`).toEqual(plain);
      }
    }
  });

  it('keeps the route safe and leaves no ask to a timer under generated deliveries, readiness and restarts', () => {
    fc.assert(
      fc.property(planArb, fc.array(stepArb, { maxLength: 200 }), (plan, steps) => {
        const w = play(plan, steps);
        expect(w.stalls).toBe(0);
        expect(w.rollout.kept.command.do).toBe('finish');
        expect(w.weight).toBe(0);
      }),
      { numRuns: 2_000, seed: 20261129 },
    );
  });
});
