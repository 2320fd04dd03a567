// One replica's informer, alone in a process: it lists and watches what the operator's informer does
// (as the operator's ServiceAccount), for every shard or for some, and reports the heap it holds once
// listed. Run by bench/informer-memory.ts, one process a measurement, so no run inherits another's heap.
// Usage: node --expose-gc --import tsx bench/harness/informer-heap.ts <kubeconfig> <shard count> <hash> <owned, e.g. 0,2 | all | none>
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import type { ShardHash } from '../../src/core/shards.js';
import { Informer } from '../../src/informer/informer.js';
import { createLogger } from '../../src/process/logger.js';

const [kubeconfig, count, hash, owned] = process.argv.slice(2) as [string, string, ShardHash, string];
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

/** Heap in use after full collections, in MiB: what the process holds, not what it has yet to free. */
async function settledHeapMiB(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await sleep(200);
  }
  return process.memoryUsage().heapUsed / 2 ** 20;
}

const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
const shards =
  owned === 'all'
    ? undefined
    : { count: Number(count), hash, owned: owned === 'none' ? [] : owned.split(',').map(Number) };
const informer = new Informer(kc, () => undefined, createLogger('warn'), { shards, maxStartingModels: 0 });
const before = await settledHeapMiB();
const started = Date.now();
await informer.start();
await informer.listed();
const listedSeconds = (Date.now() - started) / 1000;
const heapMiB = await settledHeapMiB();
const { rss } = process.memoryUsage();
console.log(
  JSON.stringify({
    owned,
    listedSeconds,
    heapBeforeMiB: before,
    heapMiB,
    rssMiB: rss / 2 ** 20,
    cached: Object.fromEntries(informer.cachedObjects),
  }),
);
await informer.stop();
process.exit(0);
