// Rollouts under an operator that keeps dying: ten models with three-step canary plans of short
// pauses, on KWOK and a real Caddy, given three waves of new images (the later ones overtake the
// rollouts in flight), four rollouts aborted as `mmctl rollout abort` does, and the operator SIGKILLed
// and started again (as its Pod would be) four times, between and inside steps. Measures, from the
// rollouts' histories, how long after each restart every rollout in flight took its next step (past
// the time its timer was due, when it was waiting on one), and how long after the last restart every
// model settled: on its spec's image, Ready, no canary left, the route without a canary share.
// Usage: npm run bench:chaos -- [--models 10] [--pause 5] [--label word]
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
// CommonJS: under tsx its names come through the default export only.
import proto from '@temporalio/proto';
import { Command, Option } from 'commander';
import { workflowIdFor, type RolloutSpec } from '../src/core/api.js';
import { wholeNumber } from '../src/process/flags.js';
import { cacheRoot } from '../tools/local-stack/components.js';
import { down, kubectlRun, up, type StackInfo } from '../tools/local-stack/stack.js';
import { abortUpdate, rolloutWorkflowType } from '../workflows/rollout-definitions.js';
import { stateQuery } from '../workflows/definitions.js';
import { CaddyProcess } from '../test/support/caddy-under-test.js';
import { machineModel } from '../test/support/models.js';
import {
  installCrds,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../test/support/operator-process.js';
import { resultsFile } from './harness/results-file.js';
import { until } from './harness/until.js';
import { makeRoom } from './harness/run.js';

const cmd = new Command('bench:chaos')
  .addOption(new Option('--models <n>', 'models').argParser(wholeNumber('--models')).default(10))
  .addOption(new Option('--pause <seconds>', "each step's pause").argParser(wholeNumber('--pause')).default(5))
  .addOption(new Option('--label <word>', 'added to the results file name'))
  .parse();
const { models, pause, label } = cmd.opts<{ models: number; pause: number; label?: string }>();

const stateDir = path.join(cacheRoot, 'stack-chaos');
const log = (line: string) => console.error(`${new Date().toISOString().slice(11, 19)} ${line}`);
const round = (x: number) => Math.round(x * 10) / 10;
const plan: RolloutSpec = {
  strategy: 'Canary',
  steps: [20, 50, 80].map((weight) => ({ weight, pause: `${pause}s` })),
};
const names = Array.from({ length: models }, (_, i) => `m-${i}`);

/** A rollout's history events, oldest first, across its runs (it continues as new at each step). */
type Event = { eventTime?: { seconds?: unknown; nanos?: number | null } | null; eventType?: unknown } & Record<
  string,
  unknown
>;

const millis = (e: Event) => Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
const typeOf = (e: Event) => proto.temporal.api.enums.v1.EventType[Number(e.eventType)] ?? String(e.eventType);

/** The commands a rollout gives: what it does when it takes a step. */
const commandTypes = new Set(
  [
    'ActivityTaskScheduled',
    'TimerStarted',
    'SignalExternalWorkflowExecutionInitiated',
    'MarkerRecorded',
    'WorkflowExecutionContinuedAsNew',
    'WorkflowExecutionCompleted',
  ].map((t) => `EVENT_TYPE_${t.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}`),
);

async function rolloutHistories(client: Client): Promise<Map<string, Event[]>> {
  const byRollout = new Map<string, Event[]>();
  for await (const wf of client.workflow.list({ query: `WorkflowType = '${rolloutWorkflowType}'` })) {
    const events = ((await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? []) as Event[];
    byRollout.set(wf.workflowId, [...(byRollout.get(wf.workflowId) ?? []), ...events]);
  }
  for (const events of byRollout.values()) events.sort((a, b) => millis(a) - millis(b));
  return byRollout;
}

/**
 * For each restart and each rollout in flight at it (started before, not closed before), the seconds
 * from the restart, or from its timer's due time if that was later, to its next command.
 */
function recoveries(histories: Map<string, Event[]>, restarts: number[]): number[] {
  const seconds: number[] = [];
  const closed = (t: string) => /COMPLETED|CANCELED|TERMINATED|FAILED|TIMED_OUT/.test(t) && /EXECUTION/.test(t);
  for (const events of histories.values()) {
    for (const at of restarts) {
      const before = events.filter((e) => millis(e) <= at);
      if (before.length === 0 || before.some((e) => closed(typeOf(e)))) continue;
      const next = events.find((e) => millis(e) > at && commandTypes.has(typeOf(e)));
      if (!next) continue;
      const timer = [...before].reverse().find((e) => typeOf(e) === 'EVENT_TYPE_TIMER_STARTED') as
        (Event & { timerStartedEventAttributes?: { startToFireTimeout?: { seconds?: unknown } } }) | undefined;
      const fired =
        timer && before.some((e) => millis(e) > millis(timer) && /TIMER_FIRED|TIMER_CANCELED/.test(typeOf(e)));
      const dueAt =
        timer && !fired
          ? millis(timer) + Number(timer.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0) * 1000
          : 0;
      seconds.push(Math.max(0, millis(next) - Math.max(at, dueAt)) / 1000);
    }
  }
  return seconds.sort((a, b) => a - b);
}

const quantile = (xs: number[], q: number) =>
  xs.length ? xs[Math.min(xs.length - 1, Math.floor(q * xs.length))]! : NaN;

async function main(): Promise<void> {
  const { file, date, commit } = resultsFile([models, 'rollout-chaos', label]);
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, realNode: false, log });
  const caddy = await CaddyProcess.create(stack);
  let operator: OperatorProcess | undefined;
  const client = await temporalClient(stack);
  try {
    makeRoom(stack, 4 * models);
    installCrds(stack);
    const ns = `chaos-${randomUUID().slice(0, 8)}`;
    kubectlRun(stack, ['create', 'namespace', ns]);
    const env = {
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: `chaos-${randomUUID().slice(0, 6)}`,
      LOG_LEVEL: process.env.MMO_CHAOS_LOG_LEVEL ?? 'warn',
      ...caddy.operatorEnv,
    };
    const start = () => (operator = startOperatorProcess(stack, env, 'chaos'));
    const restarts: number[] = [];
    const killAndStart = async (why: string) => {
      await operator!.kill();
      restarts.push(Date.now());
      start();
      log(`operator killed and started again: ${why}`);
    };
    const apply = (image: string, which = names) =>
      kubectlRun(
        stack,
        ['apply', '--server-side', '-f', '-'],
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'List',
          items: which.map((n) => machineModel(ns, n, { image, replicas: 1, rollout: plan })),
        }),
      );
    const models_ = () =>
      JSON.parse(kubectlRun(stack, ['get', 'machinemodels', '-n', ns, '-o', 'json'])).items as any[];
    const rolling = (image: string) =>
      models_().filter((m) => m.status?.rollout?.canary?.image === image && m.status.rollout.phase === 'Progressing');

    /** As `mmctl rollout abort` does, for each of these models whose rollout runs. */
    const abortRunning = async (which: string[]) => {
      for (const n of which) {
        const { rollout } = await client.workflow.getHandle(workflowIdFor(ns, n)).query(stateQuery);
        if (rollout?.running)
          await client.workflow
            .getHandle(rollout.workflowId)
            .executeUpdate(abortUpdate, { args: [{ by: 'bench' }] })
            .catch(() => undefined);
      }
    };
    start();
    apply('registry.example/m:1');
    await until(
      'every model Ready on m:1',
      () => models_().filter((m) => m.status?.phase === 'Ready').length === models,
      300_000,
      500,
    );

    // Wave 1; killed once every rollout is under way (inside a step), again between steps.
    apply('registry.example/m:2');
    await until('m:2 rolling on most models', () => rolling('registry.example/m:2').length >= models - 2, 120_000, 500);
    await killAndStart('wave 1 under way');
    await sleep(pause * 1000 + 1_500);
    await killAndStart('wave 1, between steps');
    // Wave 2 overtakes half; two of the others are aborted.
    apply('registry.example/m:3', names.slice(0, models / 2));
    await abortRunning(names.slice(models / 2, models / 2 + 2));
    await sleep(2_000);
    await killAndStart('wave 2 overtaking');
    // Wave 3 on every model; two aborted; the last kill inside its first steps.
    await sleep(pause * 1000);
    apply('registry.example/m:4');
    await until('m:4 rolling on most models', () => rolling('registry.example/m:4').length >= models - 2, 120_000, 500);
    await abortRunning(names.slice(0, 2));
    await killAndStart('wave 3 under way');
    const lastRestart = restarts.at(-1)!;

    // Settled: the aborted two stay on m:3's stable (their rollout Aborted), every other on m:4.
    const settled = (m: any) => {
      const d = JSON.parse(kubectlRun(stack, ['get', 'deployment', '-n', ns, m.metadata.name, '-o', 'json']));
      const image = d.spec.template.spec.containers[0].image;
      const aborted = m.status?.rollout?.phase === 'Aborted';
      return (
        (aborted || (image === 'registry.example/m:4' && m.status?.phase === 'Ready')) &&
        m.status?.rollout?.phase !== 'Progressing'
      );
    };
    await until('every model settled', () => models_().every(settled), 300_000, 1_000).catch((err: unknown) => {
      for (const m of models_().filter((x) => !settled(x)))
        log(
          `not settled: ${m.metadata.name} ${m.status?.phase} ${JSON.stringify(m.status?.rollout)} ${m.status?.conditions?.find((c: any) => c.type === 'Ready')?.message ?? ''}`,
        );
      throw err;
    });
    const settledSeconds = (Date.now() - lastRestart) / 1000;
    const canaries = JSON.parse(kubectlRun(stack, ['get', 'deployments', '-n', ns, '-o', 'json'])).items.filter(
      (d: any) => d.metadata.name.endsWith('-canary'),
    ).length;
    const split = JSON.stringify(await caddy.routes()).includes('-canary');

    const histories = await rolloutHistories(client);
    // With MMO_CHAOS_HISTORIES=<dir>: every rollout's events and the operators' logs, for a look.
    const keep = process.env.MMO_CHAOS_HISTORIES;
    if (keep) {
      mkdirSync(keep, { recursive: true });
      for (const [id, events] of histories)
        writeFileSync(path.join(keep, `${id.replaceAll('/', '_')}.json`), JSON.stringify(events));
      cpSync(path.join(stack.stateDir, 'logs'), path.join(keep, 'logs'), { recursive: true });
      writeFileSync(path.join(keep, 'restarts.json'), JSON.stringify(restarts));
    }
    const delays = recoveries(histories, restarts);
    let failedTasks = 0;
    for await (const wf of client.workflow.list({ query: `TaskQueue = '${env.MMO_TASK_QUEUE}'` })) {
      const events = (await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? [];
      failedTasks += events.filter((e) => e.workflowTaskFailedEventAttributes).length;
    }
    const result = {
      date,
      commit,
      models,
      pauseSeconds: pause,
      restarts: restarts.length,
      rolloutsInFlightAtRestarts: delays.length,
      nextStepAfterRestartSeconds: {
        p50: quantile(delays, 0.5),
        p90: quantile(delays, 0.9),
        max: delays.at(-1) ?? NaN,
      },
      settledAfterLastRestartSeconds: round(settledSeconds),
      canariesLeft: canaries,
      routeSplitLeft: split,
      failedWorkflowTasks: failedTasks,
      outcomes: Object.fromEntries(
        models_().map((m) => [m.metadata.name, `${m.status?.rollout?.phase} ${m.status?.rollout?.canary?.image}`]),
      ),
    };
    writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
    console.log(JSON.stringify(result, null, 2));
    console.log(`\n${file}`);
  } catch (err) {
    // Kept for a look (`MMO_CHAOS_KEEP=1`): the stack, its Temporal and the operator as they were.
    if (process.env.MMO_CHAOS_KEEP) {
      log(`kept: ${stack.kubeconfig}, Temporal ${stack.temporalAddress}`);
      process.exit(1);
    }
    throw err;
  } finally {
    await client.connection.close();
    await operator?.stop().catch(() => undefined);
    await caddy.stop();
    await down(stateDir);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
