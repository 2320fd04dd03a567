import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { request } from '../../activities/gateway/http.js';
import { freePort, portInUse } from '../../tools/local-stack/processes.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { seedExample } from '../support/models.js';
import { installCrds } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const runTs = fileURLToPath(new URL('../../tools/local-stack/run.ts', import.meta.url));

describe('npm start, against the test stack', () => {
  it('publishes the example on a local Caddy, prints its gateway URL, and Caddy answers it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mmo-main-job-'));
    const admin = await freePort();
    const http = await freePort();
    // A person's stack keeps its data: the example is there from the last run, its status saying it is
    // published on a Caddy that has just started empty. The job must wait for the route itself.
    installCrds(stack);
    k.apply(seedExample);
    const stale = {
      status: { phase: 'Ready', gatewayURL: `http://127.0.0.1:${http}/models/default/image-classifier-v1` },
    };
    k.kubectl(
      '-n',
      'default',
      'patch',
      'mm',
      'image-classifier-v1',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify(stale),
    );
    const child = spawn(process.execPath, ['--import', 'tsx', runTs], {
      env: {
        ...process.env,
        MMO_STACK_DIR: dir,
        KUBECONFIG: stack.kubeconfig,
        TEMPORAL_ADDRESS: stack.temporalAddress,
        TEMPORAL_NAMESPACE: stack.temporalNamespace,
        MMO_CADDY_ADMIN_PORT: String(admin),
        MMO_GATEWAY_PORT: String(http),
        // The example goes to namespace default; other tests' models are not this operator's.
        MMO_NAMESPACES: 'default',
        MMO_TASK_QUEUE: `main-job-${http}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const url = `http://127.0.0.1:${http}/models/default/image-classifier-v1`;
      if (stack.realNode) {
        // The test stack has a real node: the example runs on it, and the job shows a real prediction.
        const answer = await eventually(
          'the answer line',
          () => /^ {4}answered: (\d+) (.*)$/m.exec(out) ?? undefined,
          150_000,
        );
        expect(out).toContain(`  gateway: ${url}\n`);
        expect(out).toContain(`curl -s -X POST ${url}/v2/models/image-classifier-v1/infer`);
        expect(answer[1]).toBe('200');
        expect(JSON.parse(answer[2]!)).toMatchObject({ outputs: [{ name: 'label', data: [0] }] });
      } else {
        const line = await eventually(
          'the gateway line',
          () => /^ {2}gateway: (\S+) \(answers (\d+)/m.exec(out) ?? undefined,
          120_000,
        );
        expect(line[1]).toBe(url);
        // Routed to the model's Service, where nothing runs behind KWOK's pods: 502, not Caddy's catch-all 404.
        expect(line[2]).toBe('502');
        expect((await request('GET', `${url}/v1/predict`)).status).toBe(502);
      }
      expect((await request('GET', `http://127.0.0.1:${http}/models/default/nobody`)).status).toBe(404);
      expect(out).toContain('npm run mmctl -- history default/image-classifier-v1');

      // The finalizer holds the deletion until the route is gone from Caddy.
      k.kubectl('delete', 'mm', 'image-classifier-v1', '-n', 'default', '--wait=true', '--timeout=60s');
      expect((await request('GET', url)).status).toBe(404);
    } finally {
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await portInUse(admin)).toBe(false);
  }, 240_000);
});
