import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../deploy/local/processes.js';
import type { StackInfo } from '../../deploy/local/stack.js';
import { request } from '../../activities/gateway/http.js';

/** A real Caddy on loopback whose admin API the operator drives; stoppable and restartable on the same ports. */
export class CaddyProcess {
  private child: ChildProcess | undefined;

  private constructor(
    private readonly stack: StackInfo,
    readonly adminPort: number,
    /** Port the operator's model server listens on (it creates that server through the admin API). */
    readonly httpPort: number,
  ) {}

  static async create(stack: StackInfo): Promise<CaddyProcess> {
    const c = new CaddyProcess(stack, await freePort(), await freePort());
    await c.start();
    return c;
  }

  get adminURL(): string {
    return `http://127.0.0.1:${this.adminPort}`;
  }

  get publicURL(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  /** The operator's settings for publishing on this Caddy. */
  get operatorEnv(): Record<string, string> {
    return {
      MMO_GATEWAY: 'caddy',
      MMO_CADDY_ADMIN: this.adminURL,
      MMO_CADDY_LISTEN: `127.0.0.1:${this.httpPort}`,
      MMO_GATEWAY_PUBLIC_URL: this.publicURL,
    };
  }

  async start(): Promise<void> {
    const dir = path.join(this.stack.stateDir, 'logs');
    const config = path.join(dir, `caddy-${this.adminPort}.json`);
    writeFileSync(config, JSON.stringify({ admin: { listen: `127.0.0.1:${this.adminPort}` } }));
    const log = openSync(path.join(dir, `caddy-${this.adminPort}.log`), 'a');
    this.child = spawn(this.stack.binaries.caddy, ['run', '--config', config], {
      stdio: ['ignore', log, log],
      env: { ...process.env, HOME: dir },
    });
    for (let i = 0; i < 100; i++) {
      const ok = await request('GET', `${this.adminURL}/config/`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return;
      await sleep(100);
    }
    throw new Error('caddy did not start');
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }

  async routes(): Promise<
    { '@id'?: string; match?: { path?: string[] }[]; handle?: { handler: string; upstreams?: { dial: string }[] }[] }[]
  > {
    // Before the operator has created its server, Caddy answers 404 (or null): no routes.
    const res = await request('GET', `${this.adminURL}/config/apps/http/servers/machinemodels/routes`);
    const routes: unknown = res.status === 200 ? JSON.parse(res.body || 'null') : null;
    return Array.isArray(routes) ? routes : [];
  }
}
