// What each replica's informer holds at N models, all shards against a replica's share. A cluster of N
// models is laid out as the operator leaves it (each MachineModel with its Deployment, Service and Pod,
// rendered by src/core/desired-state.ts; the Deployments at 0 replicas and the Pods made directly on
// the fake node, so the cluster needs no controller to reach N), then one replica's informer lists
// and watches it, as the operator's ServiceAccount, in a process of its own: once for every shard, once
// for none (the libraries' base), and once for each half of the shards two replicas would hold.
// No Temporal and no workflows: this measures the informer's caches, which is what grows with N.
// Usage: npm run bench:informer -- [--models 10000] [--namespaces 100] [--shards 4] [--shard-hash mixed] [--label word]
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { Command, InvalidArgumentError, Option } from 'commander';
import { wholeNumber } from '../src/process/flags.js';
import type { MachineModelSpec } from '../src/core/api.js';
import { buildDeployment, buildService, childLabels, defaultBuildOptions } from '../src/core/desired-state.js';
import { shardHashes, shardOf, type ShardHash } from '../src/core/shards.js';
import { cacheRoot } from '../tools/local-stack/components.js';
import { down, fakeNodeName, kubectlRun, up } from '../tools/local-stack/stack.js';
import { machineModel } from '../test/support/models.js';
import { installCrds, operatorKubeconfig } from '../test/support/operator-process.js';
import { resultsFile } from './harness/results-file.js';
import { makeRoom } from './harness/run.js';

const cmd = new Command('bench:informer')
  .addOption(new Option('--models <n>', 'models').argParser(wholeNumber('--models')).default(10_000))
  .addOption(new Option('--namespaces <k>', 'namespaces').argParser(wholeNumber('--namespaces')).default(100))
  .addOption(new Option('--shards <k>', 'shards').argParser(wholeNumber('--shards')).default(4))
  .addOption(new Option('--shard-hash <hash>', "the operator's --shard-hash").choices(shardHashes).default('mixed'))
  .addOption(new Option('--label <word>', 'added to the results file name'))
  .parse();
const {
  models,
  namespaces: k,
  shards,
  shardHash: hash,
  label,
} = cmd.opts<{ models: number; namespaces: number; shards: number; shardHash: ShardHash; label?: string }>();

const stateDir = path.join(cacheRoot, 'stack-bench');
const log = (line: string) => console.error(`${new Date().toISOString().slice(11, 19)} ${line}`);
const round = (x: number) => Math.round(x * 10) / 10;

/** Runs `create` over the items, `width` at a time. */
async function eachAtOnce<T>(items: T[], width: number, create: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await create(items[next++]!);
    }),
  );
}

/** One model as the operator leaves it: the MachineModel, then its children owned by it. */
async function layOut(api: KubernetesObjectApi, namespace: string, name: string): Promise<void> {
  const model = machineModel(namespace, name) as KubernetesObject & { spec: MachineModelSpec };
  const created = await api.create(model);
  const ref = { namespace, name, uid: created.metadata!.uid! };
  const deployment = buildDeployment(ref, model.spec, defaultBuildOptions);
  const template = deployment.spec.template;
  await api.create({ ...deployment, spec: { ...deployment.spec, replicas: 0 } } as KubernetesObject);
  await api.create(buildService(ref, model.spec) as KubernetesObject);
  await api.create({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${name}-0`, namespace, labels: childLabels(name) },
    spec: { ...template.spec, nodeName: fakeNodeName },
  } as KubernetesObject);
}

interface Measured {
  owned: string;
  listedSeconds: number;
  heapBeforeMiB: number;
  heapMiB: number;
  rssMiB: number;
  cached: Record<string, number>;
}

function measure(kubeconfig: string, owned: string): Measured {
  const child = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      '--import',
      'tsx',
      fileURLToPath(new URL('./harness/informer-heap.ts', import.meta.url)),
      kubeconfig,
      String(shards),
      hash,
      owned,
    ],
    { encoding: 'utf8', maxBuffer: 2 ** 24 },
  );
  if (child.status !== 0) throw new Error(`the informer for shards ${owned} failed: ${child.stderr.slice(-2000)}`);
  return JSON.parse(child.stdout.trim().split('\n').at(-1)!) as Measured;
}

/** Every way to split the shards in two halves, each half once: {0,1}|{2,3}, {0,2}|{1,3}, {0,3}|{1,2} for 4. */
function halves(count: number): number[][] {
  const all = Array.from({ length: count }, (_, i) => i);
  const found: number[][] = [];
  const pick = (from: number, chosen: number[]) => {
    if (chosen.length === count / 2) {
      if (chosen[0] === 0)
        found.push(
          chosen,
          all.filter((s) => !chosen.includes(s)),
        );
      return;
    }
    for (let s = from; s < count; s++) pick(s + 1, [...chosen, s]);
  };
  pick(0, []);
  return found;
}

async function main(): Promise<void> {
  if (shards % 2 !== 0) throw new InvalidArgumentError('--shards: an even number, split between two replicas');
  const { file, commit } = resultsFile([models, `ns${k}`, 'informer', label]);
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, realNode: false, log });
  try {
    makeRoom(stack, models);
    installCrds(stack);
    // Names that differ early, as tenants' do: names alike (informer-1, informer-2, ...) hash close
    // together and land on one or two shards (docs/scaling.md).
    const namespaces = Array.from({ length: k }, () => `informer-${randomUUID().slice(0, 8)}`);
    for (const ns of namespaces) kubectlRun(stack, ['create', 'namespace', ns]);
    const admin = new KubeConfig();
    admin.loadFromFile(stack.kubeconfig);
    const api = KubernetesObjectApi.makeApiClient(admin);
    const started = Date.now();
    let laid = 0;
    await eachAtOnce(
      Array.from({ length: models }, (_, i) => i),
      32,
      async (i) => {
        await layOut(api, namespaces[i % k]!, `m-${i}`);
        if (++laid % 1000 === 0) log(`${laid} models laid out`);
      },
    );
    const layoutSeconds = round((Date.now() - started) / 1000);
    log(`${models} models and their children in ${layoutSeconds} s`);
    const modelsPerShard = Array.from({ length: shards }, () => 0);
    for (let i = 0; i < models; i++) modelsPerShard[shardOf(namespaces[i % k]!, { count: shards, hash })]!++;
    const kubeconfig = operatorKubeconfig(stack);
    const base = measure(kubeconfig, 'none');
    log(`base: heap ${base.heapMiB.toFixed(1)} MiB`);
    const all = measure(kubeconfig, 'all');
    log(`all shards: heap ${all.heapMiB.toFixed(1)} MiB, listed in ${all.listedSeconds} s`);
    const parts = halves(shards).map((owned) => {
      const m = measure(kubeconfig, owned.join(','));
      log(`shards ${m.owned}: heap ${m.heapMiB.toFixed(1)} MiB`);
      return m;
    });
    const informerMiB = (m: Measured) => round(m.heapMiB - base.heapMiB);
    const result = {
      commit,
      models,
      namespaces: k,
      shards,
      shardHash: hash,
      layoutSeconds,
      modelsPerShard,
      base,
      all,
      halves: parts,
      summary: {
        oneReplicaInformerMiB: informerMiB(all),
        halves: parts.map((m) => ({
          owned: m.owned,
          informerMiB: informerMiB(m),
          ofOne: round((100 * informerMiB(m)) / informerMiB(all)) / 100,
        })),
      },
    };
    writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
    console.log(JSON.stringify(result.summary, null, 2));
    log(`written ${path.relative(process.cwd(), file)}`);
  } finally {
    await down(stateDir);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
