// A canary rollout of one new model revision, as a durable workflow: orchestration only. Started by
// the model's workflow; every Kubernetes and gateway step is an activity (activities/canary.ts),
// every verdict a pure function (src/core/rollout.ts). docs/rollouts.md tells the design.
//
// The story of a step: size the canary for the step's weight and wait until it is ready (a canary
// that needs a person fails at once); only then send it the step's share of the requests; hold for
// the step's pause, a durable timer, looking at the canary's health as it goes; at the end judge its
// error rate over the step's requests. Every step passed: the revision is promoted, and the model's
// workflow makes it stable. A failed check rolls back (or pauses, as the plan says). People promote,
// abort, pause and resume with updates that answer at once with the rollout's view.
import {
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxySinks,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  addTraffic,
  canaryReplicas,
  durationSeconds,
  judgeCanary,
  type CanaryHealth,
  type CanaryVerdict,
  type TrafficSample,
} from '../src/core/rollout.js';
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
import type { PatchId } from './patches.js';
import { step } from './steps.js';

const viewCurrent: PatchId = 'rollout-view-current';
const trafficWatched: PatchId = 'rollout-traffic-watched';
const readyDeadline: PatchId = 'rollout-ready-deadline';

const { metrics } = proxySinks<ReconcileSinks>();

/** Workflow time since the rollout started. */
const runSeconds = () => (Date.now() - workflowInfo().startTime.getTime()) / 1000;

/** How long to wait for a canary that is still loading before looking again, at most. */
const readinessCheckMaxSeconds = 30;
const keptVerdicts = 10;

type Ending = { outcome: RolloutResult['outcome']; check?: RolloutResult['check']; message: string };

export async function canaryRolloutWorkflow(input: CanaryRolloutInput): Promise<RolloutResult> {
  const { ref, revision, plan } = input;
  const label = `${ref.namespace}/${ref.name}`;
  const checkSeconds = input.checkSeconds ?? 30;
  const readyDeadlineSeconds = input.readyDeadlineSeconds ?? 600;
  const view: RolloutView = {
    revision,
    stable: input.stable,
    phase: 'Progressing',
    step: 0,
    steps: plan.steps.length,
    weight: 0,
    verdicts: [],
  };
  /** A person's request, which the story reads at its next wake. */
  const asked = { promote: false, abort: false };
  const personActed = () => asked.promote || asked.abort;
  /** Workflow time (ms) the current pause ends, while it runs. */
  let pauseEndsAt: number | undefined;
  /** The pause's time left (ms), kept while the rollout is paused. */
  let frozenMs: number | undefined;

  const secondsLeft = () =>
    pauseEndsAt === undefined ? undefined : Math.max(0, Math.ceil((pauseEndsAt - Date.now()) / 1000));
  const snapshot = (): RolloutView => {
    const left = frozenMs !== undefined ? Math.ceil(frozenMs / 1000) : secondsLeft();
    return {
      ...view,
      ...(left !== undefined ? { pauseSecondsLeft: left } : {}),
      ...(frozenMs === undefined && pauseEndsAt !== undefined
        ? { pauseEndsAt: new Date(pauseEndsAt).toISOString() }
        : {}),
      verdicts: [...view.verdicts],
    };
  };
  const note = (line: string) => {
    view.verdicts = [...view.verdicts, line].slice(-keptVerdicts);
  };
  const details = () =>
    setCurrentDetails(
      `**${label}** rollout of \`${revision.image}\` (${revision.modelPath}) · **${view.phase}**` +
        ` · step ${view.step} of ${view.steps} · canary ${view.weight}%` +
        (view.message ? `\n\n${view.message}` : ''),
    );

  function pauseNow(by: 'person' | 'analysis', why: string) {
    if (view.phase !== 'Paused' && pauseEndsAt !== undefined) frozenMs = Math.max(0, pauseEndsAt - Date.now());
    pauseEndsAt = undefined;
    view.phase = 'Paused';
    view.pausedBy = by;
    view.message = why;
    note(why);
  }

  function resumeNow(why: string) {
    if (frozenMs !== undefined) pauseEndsAt = Date.now() + frozenMs;
    frozenMs = undefined;
    view.phase = 'Progressing';
    view.pausedBy = undefined;
    view.message = undefined;
    note(why);
  }

  const whoAsked = (cmd: RolloutCommand) => cmd.by ?? 'a person';
  const refuseWhenFinished = (_cmd: RolloutCommand) => {
    if (view.phase === 'Promoted' || view.phase === 'RolledBack' || view.phase === 'Aborted') {
      throw new Error(`the rollout of ${label} has ended (${view.phase})`);
    }
  };
  setHandler(rolloutStateQuery, snapshot);
  /** Promote and abort only record the request: the story acts on it at its next wake. */
  const askFor = (what: keyof typeof asked, words: string) => (cmd: RolloutCommand) => {
    asked[what] = true;
    note(`${words} asked by ${whoAsked(cmd)}`);
    return snapshot();
  };
  setHandler(promoteUpdate, askFor('promote', 'promotion'), { validator: refuseWhenFinished });
  setHandler(abortUpdate, askFor('abort', 'abort'), { validator: refuseWhenFinished });
  setHandler(
    pauseUpdate,
    (cmd) => {
      if (view.phase !== 'Paused') pauseNow('person', `paused by ${whoAsked(cmd)}`);
      return snapshot();
    },
    { validator: refuseWhenFinished },
  );
  setHandler(
    resumeUpdate,
    (cmd) => {
      if (view.phase === 'Paused') resumeNow(`resumed by ${whoAsked(cmd)}`);
      return snapshot();
    },
    { validator: refuseWhenFinished },
  );

  /** Tells the model's workflow (status.rollout) when the step, the weight or the phase changed. */
  let reported = '';
  async function report(result?: RolloutResult) {
    const parent = workflowInfo().parent;
    const now = `${view.step}/${view.weight}/${view.phase}/${view.message ?? ''}`;
    if (!parent || (now === reported && !result)) return;
    reported = now;
    await getExternalWorkflowHandle(parent.workflowId).signal(rolloutReportSignal, { view: snapshot(), result });
  }

  /** Waits `seconds`, or while paused until a person resumes; a person's promote or abort ends it early. */
  async function hold(seconds: number, summary: string): Promise<void> {
    details();
    await report();
    if (view.phase === 'Paused') {
      await condition(() => view.phase !== 'Paused' || personActed());
      return;
    }
    await condition(() => view.phase === 'Paused' || personActed(), `${seconds} seconds`, { summary });
  }

  const health = (replicas: number): Promise<CanaryHealth> =>
    step('applyCanary', `canary of ${label}: ${replicas} × ${revision.image}`, { ref, revision, replicas });
  const traffic = (): Promise<TrafficSample | undefined> =>
    step('canaryTraffic', "read the canary's requests on the gateway", { ref });
  async function setWeight(weight: number) {
    await step('setCanaryWeight', `send ${weight}% of ${label}'s requests to the canary`, { ref, weight, revision });
    view.weight = weight;
  }

  /** The canary sized for the step, once ready; or the check it failed. */
  async function canaryReady(replicas: number, since = Date.now()): Promise<CanaryVerdict> {
    for (let wait = 2; ; wait = Math.min(wait * 2, readinessCheckMaxSeconds)) {
      const verdict = judgeCanary(plan.analysis, await health(replicas), false);
      if (verdict.kind !== 'waiting' && patched(viewCurrent)) view.message = undefined;
      if (verdict.kind !== 'waiting' || personActed()) return verdict;
      // A canary that loads for ever would hold the rollout in Progressing (flagger#1578): it fails.
      if (Date.now() - since >= readyDeadlineSeconds * 1000 && patched(readyDeadline)) {
        return {
          kind: 'failed',
          check: 'Ready',
          message: `canary not ready within ${readyDeadlineSeconds} s: ${verdict.detail}`,
        };
      }
      view.message = verdict.detail;
      await hold(wait, `wait for the canary: ${verdict.detail}`);
    }
  }

  /** One try of a step: ready, the weight, the pause (watching the canary), the verdict. */
  async function tryStep(
    weight: number,
    pauseSeconds: number,
    stepLabel: string,
    unreadySince?: number,
  ): Promise<CanaryVerdict> {
    const replicas = canaryReplicas(input.stableReplicas, weight);
    const ready = await canaryReady(replicas, unreadySince);
    if (ready.kind === 'failed' || personActed()) return ready;
    await setWeight(weight);
    const watched = patched(trafficWatched);
    const first = await traffic();
    /** The step's requests since `first`, when the gateway reports them; and its last reading. */
    let seen: TrafficSample | undefined = first && { requests: 0, errors: 0 };
    let last = first;
    const read = async () => {
      const now = await traffic();
      if (!now) return;
      seen = addTraffic(seen ?? { requests: 0, errors: 0 }, last, now);
      last = now;
    };
    pauseEndsAt = Date.now() + pauseSeconds * 1000;
    while (view.phase === 'Paused' || secondsLeft()! > 0) {
      const left = secondsLeft() ?? 0;
      await hold(Math.min(checkSeconds, left), `${stepLabel}: pause, ${left} s left`);
      if (personActed()) return ready;
      // The gateway's counters are read at every look, so a config reload that restarts them loses
      // little, and a canary that answers errors fails before its step ends.
      const [now] = await Promise.all([health(replicas), watched ? read() : undefined]);
      const verdict = judgeCanary(plan.analysis, { ...now, ...(seen ? { traffic: seen } : {}) }, false);
      // Not ready: its share goes back at once, and the step starts over once it is (runStep).
      if (verdict.kind === 'failed' || verdict.kind === 'waiting') return verdict;
    }
    pauseEndsAt = undefined;
    let sample: TrafficSample | undefined;
    if (watched) {
      await read();
      sample = seen;
    } else {
      const after = await traffic();
      sample =
        first && after ? { requests: after.requests - first.requests, errors: after.errors - first.errors } : after;
    }
    return judgeCanary(plan.analysis, { ...(await health(replicas)), ...(sample ? { traffic: sample } : {}) }, true);
  }

  /** One step; how the rollout ends, when it ends in this step. */
  async function runStep(index: number): Promise<Ending | undefined> {
    const { weight, pause } = plan.steps[index]!;
    view.step = index + 1;
    const stepLabel = `step ${view.step} (${weight}%)`;
    /** Since when the canary was found not ready at the end of this step: one ready deadline for all tries. */
    let unreadySince: number | undefined;
    for (;;) {
      let verdict = await tryStep(weight, pause ? durationSeconds(pause)! : 0, stepLabel, unreadySince);
      if (personActed()) return undefined;
      if (verdict.kind === 'waiting') {
        unreadySince ??= Date.now();
        if (Date.now() - unreadySince >= readyDeadlineSeconds * 1000) {
          const message = `canary not ready again within ${readyDeadlineSeconds} s: ${verdict.detail}`;
          verdict = { kind: 'failed', check: 'Ready', message };
        }
      }
      switch (verdict.kind) {
        case 'healthy':
          note(`${stepLabel}: ${verdict.detail}`);
          return undefined;
        case 'inconclusive':
          // A person's resume accepts the step.
          pauseNow('analysis', `${stepLabel}: ${verdict.detail}; promote, resume or abort`);
          await hold(0, 'wait for a person');
          return undefined;
        case 'failed': {
          const why = `${stepLabel}: ${verdict.message}`;
          if (plan.onFailure !== 'Pause') {
            note(why);
            return { outcome: 'RolledBack', check: verdict.check, message: `rolled back at ${why}` };
          }
          // A person's resume tries the step again from its start.
          pauseNow('analysis', `${why}; paused for a person (onFailure: Pause)`);
          await hold(0, 'wait for a person');
          if (personActed()) return undefined;
          break;
        }
        case 'waiting':
          // Not ready in its pause or at its end: unjudged, so not passed. Its share goes back to the
          // stable revision, and the step starts again once it is ready (or fails at the deadline).
          note(`${stepLabel}: ${verdict.detail}; its share back to the stable revision, waiting again`);
          await setWeight(0);
          break;
      }
    }
  }

  /** All traffic back to the stable revision, then the canary goes: no request reaches a removed canary. */
  async function withdrawCanary() {
    await setWeight(0);
    await step('removeCanary', `remove the canary of ${label}`, { ref, revision });
  }

  let ending: Ending | undefined;
  try {
    for (let i = 0; i < plan.steps.length && !ending; i++) {
      ending = await runStep(i);
      if (asked.abort) ending = { outcome: 'Aborted', message: 'aborted by a person' };
      else if (asked.promote) ending = { outcome: 'Promoted', message: `promoted by a person at step ${view.step}` };
    }
    ending ??= { outcome: 'Promoted', message: `every step passed (${plan.steps.length})` };
    if (ending.outcome !== 'Promoted') await withdrawCanary();
  } catch (err) {
    // Cancelled: a newer revision, or the model deleted. The canary takes no traffic from here on.
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(withdrawCanary);
      metrics.rolloutEnded('Cancelled', runSeconds());
    }
    throw err;
  }
  view.phase = ending.outcome;
  view.message = ending.message;
  pauseEndsAt = undefined;
  frozenMs = undefined;
  note(ending.message);
  details();
  metrics.rolloutEnded(ending.outcome, runSeconds());
  const result: RolloutResult = { ...ending, revision, view: snapshot() };
  await report(result);
  return result;
}
