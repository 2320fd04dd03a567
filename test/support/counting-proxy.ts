// A proxy for the object store's tests: it counts what the store sends, and can slow it or refuse.
import http from 'node:http';

/**
 * An HTTP proxy in front of the store that counts the bytes the store sends, and can answer 503 to
 * the next requests (a store under load) or send only part of a body and cut it (a broken transfer).
 */
export class CountingProxy {
  bytes = 0;
  failNext = 0;
  /** When set, only requests whose path contains it are answered 503 (other Pods share the proxy). */
  failPath?: string;
  requests = 0;
  /** Bytes a second the store's answers are slowed to, when set. */
  throttle = 0;
  private constructor(
    private readonly server: http.Server,
    readonly endpoint: string,
  ) {}

  /** Listens on `host` (loopback; the real node's IP for its Pods) in front of `upstream`. */
  static async start(upstream: string, host = '127.0.0.1'): Promise<CountingProxy> {
    const target = new URL(upstream);
    let self: CountingProxy | undefined;
    const server = http.createServer((req, res) => {
      const p = self!;
      p.requests++;
      if (p.failNext > 0 && (!p.failPath || req.url?.includes(p.failPath))) {
        p.failNext--;
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end('<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>');
        return;
      }
      const up = http.request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          // Not pipe(): its 'drain' resumes the store's answer early, and the throttle would not hold.
          r.on('data', (chunk: Buffer) => {
            p.bytes += chunk.length;
            const flowing = res.write(chunk);
            if (flowing && !p.throttle) return;
            r.pause();
            let waits = flowing ? 1 : 2;
            const go = () => --waits === 0 && r.resume();
            setTimeout(go, p.throttle ? (chunk.length / p.throttle) * 1000 : 0);
            if (!flowing) res.once('drain', go);
          });
          r.on('end', () => res.end());
          // A client gone (a killed fetcher) stops the transfer, as a store's connection would.
          res.on('close', () => r.destroy());
        },
      );
      req.pipe(up);
      up.on('error', () => res.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    const port = (server.address() as { port: number }).port;
    self = new CountingProxy(server, `http://${host}:${port}`);
    return self;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
