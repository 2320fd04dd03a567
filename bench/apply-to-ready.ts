// Measures, on the real local stack, the time from `kubectl apply` of a MachineModel to (a) its
// Deployment being created and (b) its phase becoming Ready. Models are applied one at a time;
// prints the median and p90 of each. Usage: npm run bench [-- <samples>]
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { cacheRoot } from '../deploy/local/components.js';
import { down, kubectlRun, up } from '../deploy/local/stack.js';
import { machineModel } from '../test/support/models.js';
import { installCrds, startOperatorProcess } from '../test/support/operator-process.js';

const samples = Number(process.argv[2] ?? 15);
const stateDir = path.join(cacheRoot, 'stack-bench');

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

async function main(): Promise<void> {
  const stack = await up({ stateDir, ports: 'auto', fresh: true });
  try {
    installCrds(stack);
    const ns = `bench-${randomUUID().slice(0, 6)}`;
    kubectlRun(stack, ['create', 'namespace', ns]);
    const operator = startOperatorProcess(stack, { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `bench-${randomUUID()}`, LOG_LEVEL: 'warn' }, 'bench');
    const kc = new KubeConfig();
    kc.loadFromFile(stack.kubeconfig);
    const deploymentSeen = new Map<string, number>();
    const readySeen = new Map<string, number>();
    const watch = new Watch(kc);
    const w1 = await watch.watch(`/apis/apps/v1/namespaces/${ns}/deployments`, {}, (type, obj: { metadata: { name: string } }) => {
      if (type === 'ADDED' && !deploymentSeen.has(obj.metadata.name)) deploymentSeen.set(obj.metadata.name, performance.now());
    }, () => undefined);
    const w2 = await watch.watch(`/apis/stable.example.com/v1/namespaces/${ns}/machinemodels`, {}, (_t, obj: { metadata: { name: string }; status?: { phase?: string } }) => {
      if (obj.status?.phase === 'Ready' && !readySeen.has(obj.metadata.name)) readySeen.set(obj.metadata.name, performance.now());
    }, () => undefined);

    // One warm-up model: the worker bundles its workflow code and the caches fill.
    const run = async (name: string) => {
      const applied = performance.now();
      kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(machineModel(ns, name, { minReplicas: 2, maxReplicas: 2 })));
      while (!readySeen.has(name)) await new Promise((r) => setTimeout(r, 10));
      return { created: deploymentSeen.get(name)! - applied, ready: readySeen.get(name)! - applied };
    };
    await run('warmup');
    const created: number[] = [];
    const ready: number[] = [];
    for (let i = 0; i < samples; i++) {
      const r = await run(`m-${i}`);
      created.push(r.created);
      ready.push(r.ready);
    }
    w1.abort();
    w2.abort();
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
