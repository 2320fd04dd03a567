// The main job on the embedded default: bring up the local stack (unless KUBECONFIG/TEMPORAL_ADDRESS
// point elsewhere), install the CRD, run the operator, apply the seed example, and say where to look.
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { workflowIdFor } from '../../src/core/api.js';
import { parseOperatorConfig } from '../../src/plumbing/config.js';
import { createLogger } from '../../src/plumbing/logger.js';
import { startOperator } from '../../src/operator.js';
import { installRuntime, shutdownRequested } from '../../src/plumbing/runtime.js';
import { PrerequisiteError } from './install.js';
import { defaultStateDir, kubectlRun, up } from './stack.js';

const repo = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));

async function main(): Promise<void> {
  const stack = await up({ stateDir: defaultStateDir, ports: 'fixed' });
  process.env.KUBECONFIG = stack.kubeconfig;
  process.env.TEMPORAL_ADDRESS = stack.temporalAddress;
  process.env.TEMPORAL_NAMESPACE = stack.temporalNamespace;
  const kubectl = (...args: string[]) => kubectlRun(stack, args);

  kubectl('apply', '--server-side', '-k', repo('crds'));
  kubectl('wait', '--for=condition=Established', 'crd/machinemodels.stable.example.com', '--timeout=60s');

  const config = parseOperatorConfig(process.argv.slice(2));
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn');
  installRuntime(log, process.env.LOG_LEVEL ?? 'warn');
  const operator = startOperator(config, log);
  await Promise.race([operator.started, operator.done]);

  const example = repo('deploy/examples/image-classifier-v1.yaml');
  const applied = Date.now();
  kubectl('apply', '-f', example);
  const name = 'image-classifier-v1';
  const workflowId = workflowIdFor('default', name);
  const say = (line = '') => process.stdout.write(`${line}\n`);
  say(`\napplied ${example}`);
  for (let i = 0; i < 120; i++) {
    const phase = kubectl('get', 'mm', name, '-o', 'jsonpath={.status.phase}').trim();
    if (phase === 'Ready') {
      say(`${name} is Ready ${((Date.now() - applied) / 1000).toFixed(1)}s after kubectl apply`);
      break;
    }
    await sleep(500);
  }
  say('\nwhere to look:');
  say(`  export KUBECONFIG=${stack.kubeconfig}`);
  say('  kubectl get machinemodels,deployments,services,hpa');
  say(`  kubectl describe mm ${name}`);
  if (stack.temporalUiUrl) {
    say(
      `  Web UI: ${stack.temporalUiUrl}/namespaces/${stack.temporalNamespace}/workflows/${encodeURIComponent(workflowId)}`,
    );
  }
  say(`  npm run mmctl -- resync default/${name} --wait`);
  say('\nthe operator runs until Ctrl-C; the stack keeps running afterwards (npm run stack:down stops it)');
  await Promise.race([operator.done, shutdownRequested(log).then(() => operator.stop())]);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    const prefix = err instanceof PrerequisiteError ? 'missing prerequisite' : 'error';
    process.stderr.write(`${prefix}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
