// The Caddy admin URL may carry credentials (a proxy in front of the admin API); the gateway's failures
// end up in workflow histories and conditions, so they name the URL without them.
import { describe, expect, it } from 'vitest';
import { CaddyDriver, shownURL } from '../../activities/gateway/caddy-driver.js';
import { CaddyFleet } from '../../activities/gateway/caddy-fleet.js';
import { GatewayUnavailable } from '../../activities/gateway/driver.js';
import { freePort } from '../../tools/local-stack/processes.js';

describe('shownURL', () => {
  it('shows each URL of a list as its scheme, host and port: no user, password or path', () => {
    expect(shownURL('http://admin:s3cret@caddy-admin.gw.svc:2019/, https://ops@10.0.0.7:2019/t0ken/')).toBe(
      'http://caddy-admin.gw.svc:2019,https://10.0.0.7:2019',
    );
    expect(shownURL('http://127.0.0.1:2019')).toBe('http://127.0.0.1:2019');
  });

  it('does not repeat a URL that does not parse', () => {
    expect(shownURL('http://admin:s3cret@[bad')).not.toContain('s3cret');
  });
});

describe("an unreachable admin API's failure", () => {
  const options = (adminURL: string) => ({ adminURL, server: 'm', listen: ':0', publicURL: 'http://gw' });

  it('names the URL without its credentials, from one driver and from a fleet', async () => {
    const port = await freePort();
    const url = `http://admin:s3cret@127.0.0.1:${port}`;
    for (const driver of [
      new CaddyDriver(options(url)),
      new CaddyFleet(options(`${url},http://admin:s3cret@127.0.0.2:${port}`)),
    ]) {
      const failure = await driver.list().catch((err: unknown) => err);
      expect(failure).toBeInstanceOf(GatewayUnavailable);
      expect((failure as Error).message).toContain('127.0.0.1');
      expect((failure as Error).message).not.toContain('s3cret');
    }
  });
});
