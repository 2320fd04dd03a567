// A plain HTTP client for admin APIs. Not fetch: undici adds `Sec-Fetch-Mode: cors`, which Caddy's
// admin API treats as a browser request and rejects (403) without an allowed Origin.
import http from 'node:http';
import https from 'node:https';

export interface HttpResult {
  status: number;
  body: string;
}

/** `signal` ends the request early (an activity's cancellation); one already ended sends nothing. */
export function request(
  method: string,
  url: string,
  body?: unknown,
  { timeoutMs = 10_000, signal }: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const client = url.startsWith('https:') ? https : http;
    const req = client.request(
      url,
      {
        method,
        headers:
          payload === undefined
            ? {}
            : { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) },
        // A fresh connection each time: Caddy closes idle admin connections, and reusing one it just
        // closed fails with "socket hang up".
        agent: false,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs / 1000}s`)));
    req.on('error', reject);
    req.end(payload);
  });
}
