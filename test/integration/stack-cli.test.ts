import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { allComponents, componentDir } from '../../tools/local-stack/components.js';
import { freePort } from '../../tools/local-stack/processes.js';

const stack = inject('stack');
const cli = fileURLToPath(new URL('../../tools/local-stack/cli.ts', import.meta.url));

function stackCli(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['--import', 'tsx', cli, ...args], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });
}

describe('npm run stack:up as a person runs it', () => {
  it('uses an existing cluster and Temporal when KUBECONFIG and TEMPORAL_ADDRESS point at them, starting nothing', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mmo-existing-'));
    const env = { MMO_STACK_DIR: dir, KUBECONFIG: stack.kubeconfig, TEMPORAL_ADDRESS: stack.temporalAddress };
    try {
      const res = stackCli(['up'], env);
      expect(res.status).toBe(0);
      expect(res.stdout).toContain(`export KUBECONFIG=${stack.kubeconfig}`);
      expect(res.stdout).toContain(`export TEMPORAL_ADDRESS=${stack.temporalAddress}`);
      expect(res.stderr).toContain('using the existing cluster');
      expect(res.stderr).toContain('using the existing Temporal');
      const state = JSON.parse(readFileSync(path.join(dir, 'stack.json'), 'utf8')) as { processes: unknown[] };
      expect(state.processes).toEqual([]);
      expect(existsSync(path.join(dir, 'etcd'))).toBe(false);
    } finally {
      expect(stackCli(['down', '--purge'], env).status).toBe(0);
    }
  });

  it('stops with one clear line when a port it needs is taken', async () => {
    const port = await freePort();
    const blocker = net.createServer();
    // Listening before spawnSync blocks this process's event loop; the kernel then answers for it.
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    const env = {
      MMO_STACK_DIR: mkdtempSync(path.join(os.tmpdir(), 'mmo-busy-')),
      KUBECONFIG: stack.kubeconfig,
      MMO_TEMPORAL_PORT: String(port),
    };
    try {
      const res = stackCli(['up'], env);
      expect(res.status).toBe(1);
      const lines = res.stderr
        .trim()
        .split('\n')
        .filter((l) => !l.includes('npm warn'));
      expect(lines.at(-1)).toBe(
        `error: port ${port} for Temporal frontend is in use: free it, choose another with MMO_TEMPORAL_PORT=<port>, ` +
          'or point KUBECONFIG/TEMPORAL_ADDRESS at an existing cluster/Temporal.',
      );
      expect(res.stderr).not.toMatch(/\n\s+at /);
    } finally {
      // Should nothing have stopped it, it must not outlive the test.
      stackCli(['down', '--purge'], env);
      blocker.close();
    }
  });

  describe('a machine without the tools to install the stack', () => {
    const tmp = (prefix: string) => mkdtempSync(path.join(os.tmpdir(), prefix));
    /** No python3, no go: a PATH that holds nothing. Node itself is started by its absolute path. */
    const bare = () => ({
      PATH: tmp('mmo-path-'),
      KUBECONFIG: '',
      TEMPORAL_ADDRESS: '',
      MMO_STACK_DIR: tmp('mmo-bare-'),
    });
    const lastLine = (stderr: string) =>
      stderr
        .trim()
        .split('\n')
        .filter((l) => !l.includes('npm warn'))
        .at(-1);

    it('names python3 with pip when nothing is installed yet', () => {
      const cache = tmp('mmo-cache-');
      const res = stackCli(['up'], { ...bare(), MMO_CACHE_DIR: cache });
      expect(res.status).toBe(1);
      expect(lastLine(res.stderr)).toBe(
        'error: python3 with pip is required to install the local stack but `python3 -m pip --version` failed: install it, ' +
          'or point KUBECONFIG at an existing cluster and TEMPORAL_ADDRESS at an existing Temporal.',
      );
      expect(res.stderr).not.toMatch(/\n\s+at /);
      expect(readdirSync(cache)).toEqual([]);
    });

    it('names the Go toolchain when only the control plane is left to build', () => {
      // The wheels are already in the cache (linked from this run's), so the Go build is the next step.
      const cache = tmp('mmo-cache-');
      for (const c of allComponents.filter((c) => c.kind === 'wheel'))
        symlinkSync(componentDir(c), path.join(cache, path.basename(componentDir(c))));
      const env = { ...bare(), MMO_CACHE_DIR: cache };
      const res = stackCli(['up'], env);
      expect(res.status).toBe(1);
      expect(lastLine(res.stderr)).toBe(
        'error: the Go toolchain (go 1.26 or newer) is required to install the local stack but `go version` failed: install it, ' +
          'or point KUBECONFIG at an existing cluster and TEMPORAL_ADDRESS at an existing Temporal.',
      );
      expect(res.stderr).not.toMatch(/\n\s+at /);
      expect(existsSync(path.join(env.MMO_STACK_DIR, 'stack.json'))).toBe(false);
    });
  });
});
