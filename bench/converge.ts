// The cost benchmark: on its own local stack, N objects converged by the floor (plain Deployments),
// the peer (sample-controller) and this operator, in one run. Writes bench/results/<date>-<N>.json
// with its chart (.png) and prints a table with the operator's ratios to the others.
// Usage: npm run bench:converge -- --models 1000 [--rest 600] [--temporal dev|postgres] [--only floor,peer,operator]
//        [--give-up minutes] [--profile dir] [--label word] [--namespaces K] [--replicas R [--shards S] [--shard-hash H]]
//        [--delete-stopped]
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
import { shardHashes, type ShardHash } from '../src/core/shards.js';
import { wholeNumber } from '../src/process/flags.js';
import { cacheRoot } from '../tools/local-stack/components.js';
import { down, up } from '../tools/local-stack/stack.js';
import { temporalKinds, type TemporalKind } from '../tools/local-stack/temporal-postgres.js';
import { writeChart } from './harness/chart.js';
import { contenderNames, makeRoom, runContender, type ContenderName, type ContenderResult } from './harness/run.js';

const cmd = new Command('bench:converge')
  .addOption(
    new Option('--models <n>', 'objects per contender')
      .argParser((v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`a whole number >= 1, got "${v}"`);
        return n;
      })
      .default(100),
  )
  .addOption(new Option('--only <list>', 'contenders to run, comma-separated').default(contenderNames.join(',')))
  .addOption(new Option('--profile <dir>', "write the operator's V8 CPU profile into this directory"))
  .addOption(
    new Option('--temporal <kind>', "the CLI's dev server on SQLite, or the Temporal server on PostgreSQL")
      .choices(temporalKinds)
      .default('dev'),
  )
  .addOption(
    new Option('--give-up <minutes>', 'record how far a contender got after this long and go on to the next')
      .argParser((v) => {
        const n = Number(v);
        if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`a number of minutes > 0, got "${v}"`);
        return n;
      })
      .default(60),
  )
  .addOption(
    new Option('--namespaces <k>', "every contender's objects dealt round k namespaces (shards split by namespace)")
      .argParser(wholeNumber('--namespaces'))
      .default(1),
  )
  .addOption(
    new Option('--replicas <r>', 'operator replicas, as installed; with more than one they split --shards')
      .argParser(wholeNumber('--replicas'))
      .default(1),
  )
  .addOption(
    new Option(
      '--shards <s>',
      "the operator's --shards (default: 4 with several replicas, as installed; else 0)",
    ).argParser(wholeNumber('--shards', 0)),
  )
  .addOption(
    new Option('--shard-hash <hash>', "the operator's --shard-hash, with --shards")
      .choices(shardHashes)
      .default('mixed'),
  )
  .addOption(new Option('--delete-stopped', 'stop each controller before deleting its namespaces'))
  .addOption(new Option('--label <word>', 'added to the results file name, so runs of one day keep apart'))
  .addOption(
    new Option('--rest <seconds>', 'after convergence, leave each contender alone this long and measure the cost')
      .argParser((v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`a whole number of seconds, got "${v}"`);
        return n;
      })
      .default(0),
  )
  .parse();
const { models, only, profile, label, rest, temporal, giveUp, namespaces, replicas, shards, shardHash, deleteStopped } =
  cmd.opts<{
    deleteStopped?: boolean;
    shardHash: ShardHash;
    namespaces: number;
    replicas: number;
    shards?: number;
    models: number;
    giveUp: number;
    temporal: TemporalKind;
    only: string;
    profile?: string;
    label?: string;
    rest: number;
  }>();
const shardCount = shards ?? (replicas > 1 ? 4 : 0);
const chosen = only.split(',').map((s) => s.trim()) as ContenderName[];
for (const c of chosen) if (!contenderNames.includes(c)) cmd.error(`--only: unknown contender "${c}"`);

const stateDir = path.join(cacheRoot, 'stack-bench');
const resultsDir = fileURLToPath(new URL('./results', import.meta.url));
const log = (line: string) => console.error(line);

const round2 = (x: number) => Math.round(x * 100) / 100;

function ratio(a: number | undefined, b: number | undefined): string {
  return a !== undefined && b ? `${(a / b).toFixed(2)}×` : '–';
}

/** A contender's processes' values added up (the operator's replicas are `operator-0`, `operator-1`, …). */
function controllerTotal(values: Record<string, number>): number | undefined {
  const own = Object.entries(values).filter(([k]) => /^(operator|peer)(-\d+)?$/.test(k));
  return own.length ? round2(own.reduce((a, [, v]) => a + v, 0)) : undefined;
}

function table(results: Partial<Record<ContenderName, ContenderResult>>): string {
  const { floor, peer, operator } = results;
  const rows: [string, (r: ContenderResult) => number | undefined][] = [
    ['converged (s)', (r) => r.convergedSeconds],
    ['not converged when the run gave up', (r) => r.notConverged],
    ['all Deployments exist (s)', (r) => r.allDeploymentsSeconds],
    ['the kubectl apply itself (s)', (r) => r.applySeconds],
    ['the same apply with no controller running (s)', (r) => r.applyAloneSeconds],
    [
      '  the apply, slowed by the controller (×)',
      (r) => r.applySeconds && r.applyAloneSeconds && round2(r.applySeconds / r.applyAloneSeconds),
    ],
    ['machine CPU (s)', (r) => r.machineCpuSeconds],
    ['controller CPU (s), replicas added up', (r) => controllerTotal(r.cpuSeconds)],
    ['Temporal CPU (s)', (r) => r.cpuSeconds.temporal],
    ['PostgreSQL CPU (s)', (r) => r.cpuSeconds.postgres],
    [
      'controller peak RSS (MiB), the largest replica',
      (r) => {
        const own = Object.entries(r.peakRssMiB).filter(([k]) => /^(operator|peer)(-\d+)?$/.test(k));
        return own.length ? Math.max(...own.map(([, v]) => v)) : undefined;
      },
    ],
    ['apiserver requests', (r) => Object.values(r.apiserverRequests).reduce((a, b) => a + b, 0)],
    [
      'objects in the namespaces at deletion',
      (r) => r.objectsAtDeletion && Object.values(r.objectsAtDeletion).reduce((a, b) => a + b, 0),
    ],
    ['delete namespace (s)', (r) => (r.deletedStopped ? undefined : r.deleteSeconds)],
    ['delete namespace, the controller stopped first (s)', (r) => (r.deletedStopped ? r.deleteSeconds : undefined)],
    ['  of which until its own objects were gone (s)', (r) => r.ownObjectsGoneSeconds],
    ['  until no model workflow ran (s)', (r) => r.workflowsEndedSeconds],
    [
      '  after the namespaces: controller CPU (s) until then',
      (r) => r.workflowsEndCpuSeconds && controllerTotal(r.workflowsEndCpuSeconds),
    ],
    [
      '  deletion: controller CPU (s), replicas added up',
      (r) => r.deletionCpuSeconds && controllerTotal(r.deletionCpuSeconds),
    ],
    ['  deletion: Temporal CPU (s)', (r) => r.deletionCpuSeconds?.temporal],
    [
      '  deletion: kube-apiserver + etcd CPU (s)',
      (r) =>
        r.deletionCpuSeconds &&
        round2((r.deletionCpuSeconds['kube-apiserver'] ?? 0) + (r.deletionCpuSeconds.etcd ?? 0)),
    ],
    ['  deletion: machine CPU (s)', (r) => r.deletionCpuSeconds?.machine],
    ['history events per model (p50)', (r) => r.perModel?.historyEvents.p50],
    ['workflow tasks per model (p50)', (r) => r.perModel?.workflowTasks.p50],
    ['signals per model (p50)', (r) => r.signalsPerModel?.p50],
    ['workflow cache: hits', (r) => r.workflowCache?.hits],
    ['workflow cache: misses (each replays a history)', (r) => r.workflowCache?.misses],
    ['workflow cache: forced evictions', (r) => r.workflowCache?.forcedEvictions],
    [
      'activities per model, regular + local (p50)',
      (r) => r.perModel && r.perModel.activities.p50 + r.perModel.localActivities.p50,
    ],
    ['at rest: controller CPU (s/min)', (r) => r.atRest && controllerTotal(r.atRest.cpuSecondsPerMinute)],
    ['at rest: Temporal CPU (s/min)', (r) => r.atRest?.cpuSecondsPerMinute.temporal],
    ['at rest: PostgreSQL CPU (s/min)', (r) => r.atRest?.cpuSecondsPerMinute.postgres],
    ['at rest: kube-apiserver CPU (s/min)', (r) => r.atRest?.cpuSecondsPerMinute['kube-apiserver']],
    ['at rest: etcd CPU (s/min)', (r) => r.atRest?.cpuSecondsPerMinute.etcd],
    ['at rest: machine CPU (s/min)', (r) => r.atRest?.machineCpuSecondsPerMinute],
    ['at rest: apiserver requests (/min)', (r) => r.atRest?.apiserverRequestsPerMinute],
    ['at rest: history events (/min)', (r) => r.atRest?.historyEventsPerMinute],
    [
      'at rest: controller RSS at the end (MiB), replicas added up',
      (r) => r.atRest && controllerTotal(r.atRest.rssMiB),
    ],
  ];
  const lines = ['| | floor | peer | operator | operator/peer | operator/floor |', '|---|---|---|---|---|---|'];
  for (const [title, get] of rows) {
    const [f, p, o] = [floor, peer, operator].map((r) => (r ? get(r) : undefined));
    // The at-rest rows only when the run rested.
    if (f === undefined && p === undefined && o === undefined) continue;
    lines.push(`| ${title} | ${f ?? '–'} | ${p ?? '–'} | ${o ?? '–'} | ${ratio(o, p)} | ${ratio(o, f)} |`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  // Named and stamped with the commit before the run, so a change made meanwhile is not the run's.
  const date = new Date().toISOString().slice(0, 10);
  mkdirSync(resultsDir, { recursive: true });
  const name = [
    date,
    models,
    ...(temporal === 'dev' ? [] : [temporal]),
    ...(namespaces > 1 ? [`ns${namespaces}`] : []),
    ...(replicas > 1 ? [`r${replicas}`] : []),
    ...(label ? [label] : []),
  ].join('-');
  const file = path.join(resultsDir, `${name}.json`);
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }) !== '';
  const results: Partial<Record<ContenderName, ContenderResult>> = {};
  // Written after each contender is measured and again once it is deleted: a run cut short keeps what it has.
  const save = () => {
    const report = {
      date,
      models,
      restSeconds: rest,
      temporal,
      namespaces,
      replicas,
      shards: shardCount,
      ...(shardCount ? { shardHash } : {}),
      cores: os.cpus().length,
      commit: dirty ? `${commit}+changes` : commit,
      results,
    };
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  };
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, realNode: false, temporal, log });
  try {
    makeRoom(stack, models);
    for (const name of chosen) {
      results[name] = await runContender(stack, name, models, log, {
        profileDir: profile && path.resolve(profile),
        restSeconds: rest,
        giveUpSeconds: giveUp * 60,
        namespaces,
        replicas,
        shards: shardCount,
        shardHash,
        deleteStopped,
        onMeasured: (result) => {
          results[name] = result;
          save();
        },
      });
      save();
    }
  } finally {
    await down(stateDir);
  }
  await writeChart(file.replace(/\.json$/, '.png'), models, results);
  console.log(table(results));
  const slowest = results.operator?.slowest;
  if (slowest)
    console.log(
      `\nslowest operator model: ${slowest.model}, Ready ${slowest.readyLagMs} ms after its Deployment was available (its story: "slowest" in the JSON)`,
    );
  console.log(`\n${file}`);
}

// Exits explicitly: client watches and gRPC channels of the runs may hold the event loop open.
main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
