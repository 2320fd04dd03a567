// The main job on the embedded default: bring up the local stack (unless KUBECONFIG/TEMPORAL_ADDRESS
// point elsewhere) and Caddy as the local API gateway (unless MMO_GATEWAY says otherwise), install the
// CRD, run the operator, apply the seed example, and say where to look.
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { workflowIdFor } from '../../src/core/api.js';
import { selectorString } from '../../src/core/desired-state.js';
import { parseOperatorConfig } from '../../src/process/config.js';
import { createLogger } from '../../src/process/logger.js';
import { startOperator } from '../../src/operator.js';
import { installRuntime, shutdownRequested } from '../../src/process/sdk-runtime.js';
import { request } from '../../activities/gateway/http.js';
import { webUiLink } from '../../src/cli/web-ui.js';
import { CaddyProcess } from './caddy-process.js';
import { realNodeAnnotationArgs, realNodeLabel } from './real-node.js';
import { digitsRequest, sampleDigits } from './sample-digits.js';
import { cpuUsageAnnotation } from './metrics-server.js';
import { PrerequisiteError } from './install.js';
import { portInUse } from './processes.js';
import { defaultStateDir, envPort, kubectlRun, up, type StackInfo } from './stack.js';
import { ensureModelCache } from './model-cache.js';
import { storeSecret } from './object-store.js';

const repo = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));

/** Caddy on loopback, its admin API and model server on fixed ports (MMO_CADDY_ADMIN_PORT, MMO_GATEWAY_PORT). */
async function startGateway(stack: StackInfo): Promise<CaddyProcess> {
  const admin = envPort('MMO_CADDY_ADMIN_PORT', 2019);
  const http = envPort('MMO_GATEWAY_PORT', 18080);
  for (const [p, env] of [
    [admin, 'MMO_CADDY_ADMIN_PORT'],
    [http, 'MMO_GATEWAY_PORT'],
  ] as const) {
    if (await portInUse(p))
      throw new PrerequisiteError(
        `port ${p} for the local gateway (Caddy) is in use: free it, choose another with ${env}=<port>, ` +
          'or run without a gateway: MMO_GATEWAY=none npm start',
      );
  }
  const caddy = new CaddyProcess(stack.binaries.caddy, path.join(stack.stateDir, 'logs'), admin, http);
  await caddy.start();
  return caddy;
}

async function main(): Promise<void> {
  const stack = await up({ stateDir: defaultStateDir, ports: 'fixed' });
  process.env.KUBECONFIG = stack.kubeconfig;
  process.env.TEMPORAL_ADDRESS = stack.temporalAddress;
  process.env.TEMPORAL_NAMESPACE = stack.temporalNamespace;
  const kubectl = (...args: string[]) => kubectlRun(stack, args);

  kubectl('apply', '--server-side', '-k', repo('crds'));
  kubectl('wait', '--for=condition=Established', 'crd/machinemodels.stable.example.com', '--timeout=60s');

  // The stack's own real node, or one of the cluster KUBECONFIG names (a test stack's).
  const realNode = kubectl(
    'get',
    'nodes',
    '-l',
    `${realNodeLabel.key}=${realNodeLabel.value}`,
    '-o',
    'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}',
  ).includes('True');
  if (realNode) {
    // The example's namespace runs on the real node; Caddy, on this host, reaches models by cluster IP.
    kubectl('annotate', 'namespace', 'default', '--overwrite', ...realNodeAnnotationArgs);
    process.env.MMO_CADDY_UPSTREAM ??= 'cluster-ip';
  }
  const gateway = process.env.MMO_GATEWAY ? undefined : await startGateway(stack);
  if (gateway) Object.assign(process.env, gateway.operatorEnv);
  try {
    await runOperator(stack, kubectl, gateway, realNode);
  } finally {
    await gateway?.stop();
  }
}

async function runOperator(
  stack: StackInfo,
  kubectl: (...args: string[]) => string,
  gateway: CaddyProcess | undefined,
  realNode: boolean,
): Promise<void> {
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
  // A real model server answers its readiness path; behind simulated pods Caddy answers 502 anywhere.
  const route = gateway ? await published(kubectl, name, realNode ? '/v2/health/ready' : '') : undefined;
  say('\nwhere to look:');
  say(`  export KUBECONFIG=${stack.kubeconfig}`);
  say('  kubectl get machinemodels,deployments,services,hpa');
  say(`  kubectl describe mm ${name}`);
  if (stack.temporalUiUrl) {
    say(`  Web UI: ${webUiLink(stack.temporalUiUrl, stack.temporalNamespace, workflowId)}`);
  }
  say(`  npm run mmctl -- status default/${name}`);
  say(`  npm run mmctl -- history default/${name}`);
  if (route && realNode) {
    const infer = `${route.url}/v2/models/${name}/infer`;
    const digitRequest = digitsRequest([sampleDigits.zero]);
    const body = JSON.stringify(digitRequest);
    const answer = await request('POST', infer, digitRequest).then(
      (r) => `${r.status} ${r.body.trim()}`,
      (err: unknown) => String(err),
    );
    say(`  gateway: ${route.url}`);
    say(`  a prediction (scikit-learn's first 8x8 digit, a 0) through the gateway:`);
    say(`    curl -s -X POST ${infer} -H 'Content-Type: application/json' -d '${body}'`);
    say(`    answered: ${answer}`);
  } else if (route) {
    // KWOK's pods run nothing: Caddy routes the request and finds no model server behind it.
    const why = route.status === 502 ? ': routed; no model server runs behind the simulated pods' : '';
    say(`  gateway: ${route.url} (answers ${route.status}${why})`);
    say(`  (simulated pods only: ${stack.simulatedOnly ?? 'the cluster has no Ready real node'})`);
  } else if (gateway) {
    say(`  gateway: ${gateway.publicURL} (the model was not published yet: kubectl describe mm ${name})`);
  }
  if (stack.managesKube && !realNode) {
    // KWOK's pods use what this annotation says; metrics-server reports it to the autoscaler. One CPU
    // is twice the example's request, far above its 80% target.
    say(
      `  load: kubectl annotate pods -l ${selectorString(name)} ${cpuUsageAnnotation}=1 --overwrite` +
        ` (then kubectl get hpa ${name} -w: it scales up within a minute)`,
    );
  }
  if (gateway && realNode && stack.objectStore?.podEndpoint) await fromTheStore(stack, kubectl, say);
  say(
    '\nthe operator' +
      (gateway ? ' and Caddy run' : ' runs') +
      ' until Ctrl-C; the stack keeps running afterwards (npm run stack:down stops it)',
  );
  await Promise.race([operator.done, shutdownRequested(log).then(() => operator.stop())]);
}

/** The digits model from the stack's object store (deploy/examples/digits-from-s3.yaml), and its prediction. */
async function fromTheStore(
  stack: StackInfo,
  kubectl: (...args: string[]) => string,
  say: (line?: string) => void,
): Promise<void> {
  const name = 'digits-from-s3';
  // The node's model cache: its CSI plugin, installed from deploy/model-cache as an install does.
  await ensureModelCache(stack, (line) => say(line));
  // The Secret holds the stack's keys: applied from stdin, never on a command line or in a log.
  kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(storeSecret(stack.objectStore!, 'default', 'model-store')));
  const example = repo('deploy/examples/digits-from-s3.yaml');
  const applied = Date.now();
  kubectl('apply', '-f', example);
  say(`
applied ${example} (its weights in the object store, ${stack.objectStore!.sampleModel?.uri ?? ''})`);
  for (let i = 0; i < 240; i++) {
    const phase = kubectl('get', 'mm', name, '-o', 'jsonpath={.status.phase}').trim();
    if (phase === 'Ready') {
      say(
        `${name} is Ready ${((Date.now() - applied) / 1000).toFixed(1)}s after kubectl apply (fetched into the node's cache and mounted read-only)`,
      );
      break;
    }
    await sleep(500);
  }
  const route = await published(kubectl, name, '/v2/health/ready');
  if (!route) return say(`  ${name} was not published yet: kubectl describe mm ${name}`);
  const infer = `${route.url}/v2/models/${name}/infer`;
  const answer = await request('POST', infer, digitsRequest([sampleDigits.one])).then(
    (r) => `${r.status} ${r.body.trim()}`,
    (err: unknown) => String(err),
  );
  say(`  a prediction (a 1) from the model served out of the store: ${answer}`);
}

/**
 * The model's gateway URL and what Caddy answers there, once the route is on this Caddy; undefined
 * after 30 s. The status alone is not enough: on a stack kept from an earlier run it already names
 * the URL while the freshly started Caddy has no route yet (connection refused, or Caddy's 404).
 */
async function published(
  kubectl: (...args: string[]) => string,
  name: string,
  path: string,
): Promise<{ url: string; status: number } | undefined> {
  for (let i = 0; i < 60; i++) {
    const url = kubectl('get', 'mm', name, '-o', 'jsonpath={.status.gatewayURL}').trim();
    const status = url
      ? await request('GET', `${url}${path}`).then(
          (r) => r.status,
          () => undefined,
        )
      : undefined;
    if (url && status !== undefined && status !== 404) return { url, status };
    await sleep(500);
  }
  return undefined;
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    const prefix = err instanceof PrerequisiteError ? 'missing prerequisite' : 'error';
    process.stderr.write(`${prefix}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
