// The local Caddy on free ports for a test, and a look at the routes the operator gave it.
import path from 'node:path';
import { CaddyProcess as LocalCaddy } from '../../tools/local-stack/caddy-process.js';
import { freePort } from '../../tools/local-stack/processes.js';
import type { StackInfo } from '../../tools/local-stack/stack.js';
import { request } from '../../activities/gateway/http.js';

export class CaddyProcess extends LocalCaddy {
  static async create(stack: StackInfo): Promise<CaddyProcess> {
    const dir = path.join(stack.stateDir, 'logs');
    const c = new CaddyProcess(stack.binaries.caddy, dir, await freePort(), await freePort());
    await c.start();
    return c;
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
