// Measures the operator's memory as its image runs it (compiled, prebuilt workflow bundle), one
// replica on the real local stack: resident set once it is ready and idle, and at its peak while N
// models (one kubectl apply) converge to Ready and stay watched. The Deployment's requests and limits
// (deploy/operator/deployment.yaml) are sized from this. Usage: npm run bench:memory [-- <models>]
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { cacheRoot } from '../tools/local-stack/components.js';
import { freePort } from '../tools/local-stack/processes.js';
import { down, kubectlRun, up } from '../tools/local-stack/stack.js';
import { machineModel } from '../test/support/models.js';
import { installCrds, operatorProbe, startOperatorProcess } from '../test/support/operator-process.js';
import { imageNodeOptions } from './harness/image-node-options.js';

const models = Number(process.argv[2] ?? 100);
const stateDir = path.join(cacheRoot, 'stack-bench');

/** Resident set now and its high-water mark, in MiB, from /proc. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) / 1024;
  return { rss: Math.round(kib('VmRSS')), peak: Math.round(kib('VmHWM')) };
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (
    !(await Promise.resolve()
      .then(check)
      .catch(() => false))
  ) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what} not within ${timeoutMs / 1000}s`);
    await sleep(500);
  }
  return (Date.now() - started) / 1000;
}

async function main(): Promise<void> {
  const stack = await up({ stateDir, ports: 'auto', fresh: true, podMetrics: false, realNode: false });
  try {
    installCrds(stack);
    const ns = `bench-${randomUUID().slice(0, 6)}`;
    kubectlRun(stack, ['create', 'namespace', ns]);
    const metricsPort = await freePort();
    const operator = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns,
        MMO_TASK_QUEUE: `bench-${randomUUID()}`,
        MMO_METRICS_PORT: String(metricsPort),
        LOG_LEVEL: 'warn',
        NODE_OPTIONS: imageNodeOptions(),
      },
      'bench-memory',
    );
    const pid = operator.child.pid!;
    // The stack's Temporal server runs the same command as the all-in-one install's (deploy/temporal).
    const temporalPid = stack.processes.find((p) => p.name === 'temporal')!.pid;
    await until('/readyz 200', async () => (await operatorProbe(metricsPort, '/readyz')).status === 200, 120_000);
    await sleep(10_000);
    const idle = memoryOf(pid);
    const temporalIdle = memoryOf(temporalPid);

    const items = Array.from({ length: models }, (_, i) => machineModel(ns, `m-${i}`));
    kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    const readyCount = () =>
      kubectlRun(stack, ['-n', ns, 'get', 'mm', '-o', 'jsonpath={.items[*].status.phase}'])
        .split(' ')
        .filter((p) => p === 'Ready').length;
    const converged = await until(`${models} models Ready`, () => readyCount() === models, 30 * 60_000);
    await sleep(30_000);
    const loaded = memoryOf(pid);
    const temporalLoaded = memoryOf(temporalPid);
    await operator.stop();
    console.log(
      JSON.stringify({
        models,
        convergedSeconds: converged,
        operator: { idleMiB: idle.rss, loadedMiB: loaded.rss, peakMiB: loaded.peak },
        temporalServer: { idleMiB: temporalIdle.rss, loadedMiB: temporalLoaded.rss, peakMiB: temporalLoaded.peak },
      }),
    );
    console.log(`operator RSS: idle ${idle.rss} MiB; ${models} models Ready after ${converged.toFixed(0)} s;`);
    console.log(`              30 s later ${loaded.rss} MiB; peak (VmHWM) ${loaded.peak} MiB`);
    console.log(
      `Temporal dev server RSS: idle ${temporalIdle.rss} MiB; loaded ${temporalLoaded.rss} MiB; peak ${temporalLoaded.peak} MiB`,
    );
  } finally {
    await down(stateDir);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
