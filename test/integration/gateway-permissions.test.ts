import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CaddyDriver } from '../../activities/gateway/caddy-driver.js';
import { createActivities } from '../../activities/index.js';
import { KubeClient } from '../../activities/kube-client.js';
import { writeServiceAccountKubeconfig } from '../../tools/local-stack/kubeconfig.js';
import { defaultBuildOptions } from '../../src/core/desired-state.js';
import { routeId } from '../../src/core/route-rules.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { installCrds } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let caddy: CaddyProcess;
let activities: ReturnType<typeof createActivities>;

// A ServiceAccount that may read one MachineModel but not list them: the gateway janitor's
// activities list every model, so they fail, and must say so as a Kubernetes permission problem.
beforeAll(async () => {
  installCrds(stack);
  caddy = await CaddyProcess.create(stack);
  const ns = k.createNamespace('gw-perm');
  k.kubectl('-n', ns, 'create', 'serviceaccount', 'no-list');
  k.kubectl('create', 'clusterrole', `${ns}-get-only`, '--verb=get', '--resource=machinemodels.stable.example.com');
  k.kubectl(
    'create',
    'clusterrolebinding',
    `${ns}-get-only`,
    `--clusterrole=${ns}-get-only`,
    `--serviceaccount=${ns}:no-list`,
  );
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'mmo-sa-')), 'kubeconfig');
  writeServiceAccountKubeconfig({
    kubectl: stack.binaries.kubectl,
    adminKubeconfig: stack.kubeconfig,
    namespace: ns,
    serviceAccount: 'no-list',
    file,
  });
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  const gateway = new CaddyDriver({
    adminURL: caddy.adminURL,
    server: 'machinemodels',
    listen: `127.0.0.1:${caddy.httpPort}`,
    publicURL: caddy.publicURL,
  });
  // The first admin call creates the model server, which Caddy may answer with a reset: not under test.
  await eventually('the Caddy model server', () => gateway.list().then(() => true));
  activities = createActivities({ kube: new KubeClient(kc), build: defaultBuildOptions, gateway });
});

afterAll(async () => {
  await caddy?.stop();
});

async function failureOf(run: () => Promise<unknown>): Promise<ApplicationFailure> {
  const err = await run().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('gateway activities whose Kubernetes calls are forbidden', () => {
  it.each([
    ['inspectGateway', () => activities.inspectGateway()],
    [
      'removeCollidingRoute',
      () => {
        const owner = { namespace: 'ns', name: 'm', uid: 'u' };
        return activities.removeCollidingRoute({ id: routeId(owner), owner, pathPrefix: '/m', createdAt: '' });
      },
    ],
  ])('%s fails as Forbidden, not retried, with the apiserver message and no response dump', async (_, run) => {
    const failure = await failureOf(run);
    expect(failure.type, failure.message).toBe('Forbidden');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/machinemodels.stable.example.com is forbidden.*cannot list/);
    expect(failure.message).toContain("grant the operator's ServiceAccount this permission");
    // The client's own error message dumps the response, headers included.
    expect(failure.message).not.toMatch(/Headers|Body:|"kind":"Status"/);
  });
});
