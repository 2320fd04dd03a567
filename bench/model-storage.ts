// Apply to Ready of a model whose weights (256 MiB) are in the object store, on the real node: cold
// (the node fetches them), warm (found in the node's cache) and, for comparison, the same server with
// its model baked into the image (already on the node: no registry here, so no pull); and how long the
// model cache's plugin takes to publish a warm artifact into a Pod (its log's `published` lines).
// Usage: npm run bench:storage [-- <samples>]; prints medians, writes bench/results/<date>-model-storage.json.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { modelServerImage } from '../tools/images/catalog.js';
import { cacheRoot } from '../tools/local-stack/components.js';
import { putObject, storeSecret } from '../tools/local-stack/object-store.js';
import { realNodeAnnotationArgs } from '../tools/local-stack/real-node.js';
import { ensureModelCache, modelCacheNamespace } from '../tools/local-stack/model-cache.js';
import { down, kubectlRun, startStackObjectStore, up } from '../tools/local-stack/stack.js';
import { machineModel } from '../test/support/models.js';
import { installCrds, startOperatorProcess } from '../test/support/operator-process.js';

const samples = Number(process.argv[2] ?? 3);
const sizeMiB = 256;
const stateDir = path.join(cacheRoot, 'stack-bench-storage');

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, objectStore: false });
  if (!stack.realNode) throw new Error(`a real node is needed: ${stack.simulatedOnly ?? 'none runs'}`);
  try {
    const store = await startStackObjectStore(stack);
    await ensureModelCache(stack);
    installCrds(stack);
    const ns = `bench-${randomUUID().slice(0, 6)}`;
    const kubectl = (...args: string[]) => kubectlRun(stack, args);
    kubectl('create', 'namespace', ns);
    kubectl('annotate', 'namespace', ns, ...realNodeAnnotationArgs);
    kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(storeSecret(store, ns, 'store')));
    const operator = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns,
        MMO_TASK_QUEUE: `bench-${randomUUID()}`,
        LOG_LEVEL: 'warn',
      },
      'bench-storage',
    );
    const model = (name: string, spec: object) =>
      machineModel(ns, name, {
        image: modelServerImage.ref,
        resources: { cpu: '250m', memory: '256Mi' },
        replicas: 1,
        ...spec,
      });
    const timeToReady = async (obj: ReturnType<typeof model>) => {
      const applied = performance.now();
      kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(obj));
      for (;;) {
        const phase = kubectl('get', 'mm', '-n', ns, obj.metadata.name, '-o', 'jsonpath={.status.phase}').trim();
        if (phase === 'Ready') return (performance.now() - applied) / 1000;
        if (performance.now() - applied > 300_000) throw new Error(`${obj.metadata.name} not Ready in 5 minutes`);
        await sleep(100);
      }
    };
    const remove = async (name: string) => {
      kubectl('delete', 'mm', '-n', ns, name, '--wait=true', '--timeout=120s');
      while (kubectl('get', 'pods', '-n', ns, '-l', `app.kubernetes.io/instance=${name}`, '-o', 'name').trim())
        await sleep(500);
    };
    const digits = readFileSync(path.join(stateDir, 'object-store', 'digits.joblib'));
    const cold: number[] = [];
    const warm: number[] = [];
    const baked: number[] = [];
    for (let i = 0; i < samples; i++) {
      // The digits model with random bytes after it: the server's pickle load stops at its end.
      const { uri, sha256 } = await putObject(
        store,
        `bench/${i}/digits.joblib`,
        Buffer.concat([digits, randomBytes(sizeMiB * 2 ** 20)]),
      );
      const spec = { modelPath: undefined, storageUri: uri, sha256, storageSecret: 'store' };
      cold.push(await timeToReady(model('stored', spec)));
      await remove('stored');
      warm.push(await timeToReady(model('stored', spec)));
      await remove('stored');
      baked.push(await timeToReady(model('baked', { modelPath: '/models/digits.joblib' })));
      await remove('baked');
      console.error(
        `sample ${i + 1}: cold ${cold.at(-1)!.toFixed(1)} s, warm ${warm.at(-1)!.toFixed(1)} s, baked ${baked.at(-1)!.toFixed(1)} s`,
      );
    }
    await operator.stop();
    // Publishes of an artifact the node had (every publish but each cold sample's first).
    const publishes = kubectl('logs', '-n', modelCacheNamespace, 'daemonset/model-cache')
      .split('\n')
      .filter((l) => l.includes('"published"'))
      .map((l) => (JSON.parse(l) as { ms: number }).ms);
    const warmPublishMs = publishes.filter((_, i) => i % 2 === 1);
    const result = {
      date: new Date().toISOString(),
      sizeMiB,
      samples,
      medianSeconds: { cold: median(cold), warm: median(warm), baked: median(baked) },
      warmOverBaked: median(warm) / median(baked),
      medianWarmPublishMs: median(warmPublishMs),
      seconds: { cold, warm, baked },
      warmPublishMs,
    };
    console.log(JSON.stringify(result, null, 2));
    const dir = path.join(import.meta.dirname, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, `${result.date.slice(0, 10)}-model-storage.json`),
      `${JSON.stringify(result, null, 2)}\n`,
    );
  } finally {
    await down(stateDir, true);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
