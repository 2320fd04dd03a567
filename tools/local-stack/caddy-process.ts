// A real Caddy on loopback for the main job and the tests: the local API gateway whose admin API the
// operator drives. Stoppable and restartable on the same ports.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from '../../activities/gateway/http.js';

export class CaddyProcess {
  private child: ChildProcess | undefined;

  /** `dir` holds its config and log; `httpPort` is where the operator's model server listens. */
  constructor(
    private readonly binary: string,
    private readonly dir: string,
    readonly adminPort: number,
    readonly httpPort: number,
  ) {}

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

  /** Where Caddy autosaves every config the operator gives it, apart for each instance. */
  private get configHome(): string {
    return path.join(this.dir, `caddy-${this.adminPort}-config`);
  }

  /**
   * Starts Caddy with the config it last autosaved (`--resume`: a restarted gateway serves every route
   * at once, as the in-cluster one does), or with the admin API only the first time or when `empty`
   * (a gateway that lost its state, as a Pod on another node does).
   */
  async start(opts: { empty?: boolean } = {}): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    if (opts.empty) rmSync(this.configHome, { recursive: true, force: true });
    const config = path.join(this.dir, `caddy-${this.adminPort}.json`);
    writeFileSync(config, JSON.stringify({ admin: { listen: `127.0.0.1:${this.adminPort}` } }));
    const log = openSync(path.join(this.dir, `caddy-${this.adminPort}.log`), 'a');
    this.child = spawn(this.binary, ['run', '--config', config, '--resume'], {
      stdio: ['ignore', log, log],
      // A listen address may name it ({env.MMO_GATEWAY_LISTEN}): several Caddies on one host, given one config.
      env: {
        ...process.env,
        HOME: this.dir,
        XDG_CONFIG_HOME: this.configHome,
        MMO_GATEWAY_LISTEN: `127.0.0.1:${this.httpPort}`,
      },
    });
    for (let i = 0; i < 100; i++) {
      const ok = await request('GET', `${this.adminURL}/config/`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return;
      if (this.child.exitCode !== null || this.child.signalCode !== null) break;
      await sleep(100);
    }
    throw new Error(`caddy did not start: see ${path.join(this.dir, `caddy-${this.adminPort}.log`)}`);
  }

  async stop(signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM'): Promise<void> {
    const child = this.child;
    // Gone already: exited, or ended by a signal (exitCode stays null then).
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await exited;
  }
}
