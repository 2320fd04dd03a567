// How far a model's fetch-model init container has come: it answers GET /progress on its Pod's
// address (src/fetcher.ts). Read while a round finds the model fetching, for its Ready condition.
// Best effort and brief: a Pod that does not answer within a second, or answers more than a few
// bytes (it is a tenant's Pod), leaves the progress out.
import http from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';
import { fetchProgressOf, type FetchProgress } from '../src/core/container-troubles.js';
import { fetchContainerName, fetchProgressPort } from '../src/core/model-source.js';

const maxAnswerBytes = 1024;

export async function fetchProgress(pods: V1Pod[]): Promise<FetchProgress | undefined> {
  const ip = pods.find(
    (p) =>
      !p.metadata?.deletionTimestamp &&
      p.status?.podIP &&
      p.status.initContainerStatuses?.some((c) => c.name === fetchContainerName && c.state?.running),
  )?.status?.podIP;
  if (!ip) return undefined;
  const host = ip.includes(':') ? `[${ip}]` : ip;
  const body = await get(`http://${host}:${fetchProgressPort}/progress`).catch(() => undefined);
  try {
    return body === undefined ? undefined : fetchProgressOf(JSON.parse(body));
  } catch {
    return undefined;
  }
}

function get(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: 1_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > maxAnswerBytes) req.destroy(new Error('answer too long'));
      });
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`HTTP ${res.statusCode}`))));
      res.on('error', reject);
    });
    // A whole answer within the second, however slowly its bytes come.
    const deadline = setTimeout(() => req.destroy(new Error('timed out')), 1_000);
    req.on('close', () => clearTimeout(deadline));
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}
