// Measures, on the real local stack, the time from `kubectl apply` of a MachineModel to (a) its
// Deployment being created and (b) its phase becoming Ready. Models are applied one at a time;
// prints the median and p90 of each. Usage: npm run bench [-- <samples>]
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { AppsV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { cacheRoot } from '../tools/local-stack/components.js';
import { down, kubectlRun, up } from '../tools/local-stack/stack.js';
import { machineModel } from '../test/support/models.js';
import { installCrds, startOperatorProcess } from '../test/support/operator-process.js';

const samples = Number(process.argv[2] ?? 15);
const stateDir = path.join(cacheRoot, 'stack-bench');

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

async function main(): Promise<void> {
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, realNode: false });
  try {
    installCrds(stack);
    const ns = `bench-${randomUUID().slice(0, 6)}`;
    kubectlRun(stack, ['create', 'namespace', ns]);
    const operator = startOperatorProcess(
      stack,
      { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `bench-${randomUUID()}`, LOG_LEVEL: 'warn' },
      'bench',
    );
    const kc = new KubeConfig();
    kc.loadFromFile(stack.kubeconfig);
    const apps = kc.makeApiClient(AppsV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);

    // Polls the API every 10 ms (a watch can miss events right after the CRD is installed).
    const run = async (name: string) => {
      const applied = performance.now();
      kubectlRun(
        stack,
        ['apply', '-f', '-'],
        JSON.stringify(machineModel(ns, name, { minReplicas: 2, maxReplicas: 2 })),
      );
      let created: number | undefined;
      while (performance.now() - applied < 60_000) {
        if (
          created === undefined &&
          (await apps.readNamespacedDeployment({ namespace: ns, name }).catch(() => undefined))
        )
          created = performance.now() - applied;
        const mm = (await custom.getNamespacedCustomObject({
          group: 'stable.example.com',
          version: 'v1',
          namespace: ns,
          plural: 'machinemodels',
          name,
        })) as { status?: { phase?: string } };
        if (mm.status?.phase === 'Ready' && created !== undefined)
          return { created, ready: performance.now() - applied };
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`${name} not Ready within 60s`);
    };
    // One warm-up model: the worker bundles its workflow code and the caches fill.
    await run('warmup');
    const created: number[] = [];
    const ready: number[] = [];
    for (let i = 0; i < samples; i++) {
      const r = await run(`m-${i}`);
      created.push(r.created);
      ready.push(r.ready);
    }
    await operator.stop();
    const fmt = (xs: number[]) => `median ${quantile(xs, 0.5).toFixed(0)} ms, p90 ${quantile(xs, 0.9).toFixed(0)} ms`;
    console.log(`samples: ${samples} (2 replicas each, one model at a time, KWOK node)`);
    console.log(`kubectl apply -> Deployment created: ${fmt(created)}`);
    console.log(`kubectl apply -> phase Ready:        ${fmt(ready)}`);
  } finally {
    await down(stateDir);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
