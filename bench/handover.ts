// A replica SIGKILLed in the middle of a rollout of N models. Two sharded replicas, as installed
// (--shards 4, Leases, each as the operator's ServiceAccount), split N models dealt round K
// namespaces; once every model is Ready, each is given a new image with a canary step and a pause,
// and once a quarter of the rollouts are under way the replica holding the most shards is killed.
// Measures how long until the survivor holds every shard, how long until every rollout ended
// (promoted, or rolled back by its progress deadline) and whether any model's workflow tasks or
// activities (their last attempts: a retried one shows only its last) ran on two replicas at once,
// from the histories; local activities run inside workflow tasks.
// Usage: npm run bench:handover -- [--models 1000] [--namespaces 16] [--pause 300] [--label word]
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Command, Option } from 'commander';
import { wholeNumber } from '../src/process/flags.js';
import type { RolloutSpec } from '../src/core/api.js';
import { cacheRoot } from '../tools/local-stack/components.js';
import { down, kubectlRun, up, type StackInfo } from '../tools/local-stack/stack.js';
import { machineModel } from '../test/support/models.js';
import { rolloutWorkflowType } from '../workflows/rollout-definitions.js';
import {
  installCrds,
  shardsHeld,
  startShardedReplica,
  temporalClient,
  type ShardedReplica,
} from '../test/support/operator-process.js';
import { concurrentWork, workIntervals, workers } from './harness/concurrent-work.js';
import { imageNodeOptions } from './harness/image-node-options.js';
import { resultsFile } from './harness/results-file.js';
import { until } from './harness/until.js';
import { makeRoom } from './harness/run.js';

const cmd = new Command('bench:handover')
  .addOption(new Option('--models <n>', 'models').argParser(wholeNumber('--models')).default(1000))
  .addOption(new Option('--namespaces <k>', 'namespaces').argParser(wholeNumber('--namespaces')).default(16))
  .addOption(
    new Option('--pause <seconds>', "the canary step's pause: longer than the canaries take to start")
      .argParser(wholeNumber('--pause'))
      .default(300),
  )
  .addOption(new Option('--label <word>', 'added to the results file name'))
  .parse();
const {
  models,
  namespaces: k,
  pause,
  label,
} = cmd.opts<{ models: number; namespaces: number; pause: number; label?: string }>();

const shards = 4;
const stateDir = path.join(cacheRoot, 'stack-bench');
const log = (line: string) => console.error(`${new Date().toISOString().slice(11, 19)} ${line}`);
const round = (x: number) => Math.round(x * 10) / 10;
const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 50, pause: `${pause}s` }] };

/** Each model's phase, image and rollout, from one list of every namespace's models. */
function modelStates(stack: StackInfo, namespaces: string[]) {
  const items = JSON.parse(kubectlRun(stack, ['get', 'machinemodels', '-A', '-o', 'json'])).items as any[];
  return items.filter((m) => namespaces.includes(m.metadata.namespace));
}

function dealt(namespaces: string[], image: string): object[] {
  return Array.from({ length: models }, (_, i) =>
    machineModel(namespaces[i % namespaces.length]!, `m-${i}`, { image, replicas: 1, rollout: plan }),
  );
}

const apply = (stack: StackInfo, items: object[]) =>
  kubectlRun(stack, ['apply', '--server-side', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));

async function main(): Promise<void> {
  const { file, date, commit } = resultsFile([models, `ns${k}`, 'handover', label]);
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, realNode: false, log });
  const replicas: ShardedReplica[] = [];
  try {
    // The stable revision's Pods and the canaries' at once.
    makeRoom(stack, 2 * models);
    installCrds(stack);
    const id = randomUUID().slice(0, 6);
    // Random names, as in the runs recorded before the mixed hash (with the apiserver's hash, names
    // alike could leave one replica's shards empty: docs/scaling.md).
    const namespaces = Array.from({ length: k }, () => `handover-${randomUUID().slice(0, 8)}`);
    for (const ns of namespaces) kubectlRun(stack, ['create', 'namespace', ns]);
    const env = {
      MMO_NAMESPACES: namespaces.join(','),
      MMO_TASK_QUEUE: `handover-${id}`,
      LOG_LEVEL: 'warn',
      NODE_OPTIONS: imageNodeOptions(),
      // This cluster starts canaries at about one a second: the last of 1,000 waits about 17 minutes,
      // past the default 600 s deadline. Raised, as a platform rolling out 1,000 models at once would,
      // so the run measures the handover and not the cluster's pace.
      MMO_PROGRESS_DEADLINE_SECONDS: String(Math.max(600, 3 * models)),
    };
    for (const name of ['a', 'b'])
      replicas.push(await startShardedReplica(stack, { count: shards, hash: 'mixed' }, `handover-${name}`, env));
    await until(
      'the shards split',
      async () => (await Promise.all(replicas.map(shardsHeld))).every((n) => n === shards / 2),
      120_000,
      500,
    );

    apply(stack, dealt(namespaces, 'registry.example/m:1'));
    const v1Seconds = await until(
      `${models} models Ready`,
      () => modelStates(stack, namespaces).filter((m) => m.status?.phase === 'Ready').length === models,
      3_600_000,
      10_000,
    );
    log(`${models} models Ready in ${round(v1Seconds)}s; rolling out m:2`);

    const rolling = performance.now();
    apply(stack, dealt(namespaces, 'registry.example/m:2'));
    const paused = (m: any) =>
      m.status?.rollout?.canary?.image === 'registry.example/m:2' && m.status.rollout.weight === 50;
    const underWay = (m: any) => m.status?.rollout?.canary?.image === 'registry.example/m:2';
    // Killed once a quarter of the rollouts are under way: most canaries are still to start, some paused.
    // (Canaries start at the cluster's pace, about one a second here: by the time a quarter were paused
    // the first had finished a 300 s pause.)
    await until(
      'a quarter of the rollouts under way',
      () => modelStates(stack, namespaces).filter(underWay).length >= models / 4,
      3_600_000,
      5_000,
    );
    const pausedAtKill = modelStates(stack, namespaces).filter(paused).length;
    const held = await Promise.all(replicas.map(shardsHeld));
    const victim = replicas[held[0]! >= held[1]! ? 0 : 1]!;
    const survivor = replicas.find((r) => r !== victim)!;
    const victimShards = Math.max(...held);
    const killed = performance.now();
    await victim.process.kill();
    log(`killed ${victim.identity} (${victimShards} shards) with ${pausedAtKill} of ${models} canaries paused`);
    const handoverSeconds = await until(
      'every shard held by the survivor',
      async () => (await shardsHeld(survivor)) === shards,
      120_000,
      100,
    );
    log(`the survivor held every shard ${round(handoverSeconds)}s after the kill`);

    // Ended: promoted and Ready, or rolled back (a canary not ready by its progress deadline).
    const ended = (m: any) =>
      m.status?.rollout?.canary?.image === 'registry.example/m:2' &&
      ((m.status.rollout.phase === 'Promoted' && m.status.phase === 'Ready') ||
        m.status.rollout.phase === 'RolledBack');
    await until(
      `${models} rollouts ended`,
      () => modelStates(stack, namespaces).filter(ended).length === models,
      3_600_000,
      10_000,
    );
    const promotedAfterKill = (performance.now() - killed) / 1000;
    const outcomes: Record<string, number> = {};
    for (const m of modelStates(stack, namespaces)) {
      const key = `${m.status.rollout.phase}: ${m.status.rollout.message ?? ''}`;
      outcomes[key] = (outcomes[key] ?? 0) + 1;
    }
    const rolloutSeconds = (performance.now() - rolling) / 1000;
    log(`every rollout ended ${round(promotedAfterKill)}s after the kill`);

    // Every workflow of the models, each history checked: their reconcile loops (listed by the search
    // attribute) and their rollouts (which carry none: listed by type; this stack runs nothing else).
    const client = await temporalClient(stack);
    let histories = 0;
    let handedOver = 0;
    const overlapping: string[] = [];
    try {
      const quoted = namespaces.map((ns) => `'${ns}'`).join(', ');
      const query = `MachineModelNamespace IN (${quoted}) OR WorkflowType = '${rolloutWorkflowType}'`;
      for await (const wf of client.workflow.list({ query })) {
        const events = (await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? [];
        const intervals = workIntervals(events, Date.now());
        histories++;
        if (workers(intervals).size > 1) handedOver++;
        if (concurrentWork(intervals).length) overlapping.push(`${wf.workflowId} (run ${wf.runId})`);
      }
    } finally {
      await client.connection.close();
    }
    const result = {
      date,
      commit,
      models,
      namespaces: k,
      shards,
      pauseSeconds: pause,
      v1ReadySeconds: round(v1Seconds),
      killAfterApplySeconds: round((killed - rolling) / 1000),
      canariesPausedAtKill: pausedAtKill,
      victimShards,
      shardsHeldAgainSeconds: round(handoverSeconds),
      rolloutsEndedAfterKillSeconds: round(promotedAfterKill),
      rolloutOutcomes: outcomes,
      rolloutSeconds: round(rolloutSeconds),
      historiesChecked: histories,
      historiesWorkedOnByBothReplicas: handedOver,
      historiesWithConcurrentWork: overlapping.length,
      concurrentWork: overlapping.slice(0, 20),
    };
    writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
    console.log(JSON.stringify(result, null, 2));
    console.log(`\n${file}`);
  } finally {
    for (const r of replicas) await r.process.stop().catch(() => undefined);
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
