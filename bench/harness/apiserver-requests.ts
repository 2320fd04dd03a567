// Requests the apiserver has served, by verb and by verb and resource, from its own /metrics
// (apiserver_request_total).
import { kubectlRun, type StackInfo } from '../../tools/local-stack/stack.js';

export interface RequestCounts {
  byVerb: Record<string, number>;
  /** "VERB resource[/subresource]", e.g. "GET deployments". */
  byResource: Record<string, number>;
}

export function apiserverRequests(stack: StackInfo): RequestCounts {
  const counts: RequestCounts = { byVerb: {}, byResource: {} };
  for (const line of kubectlRun(stack, ['get', '--raw', '/metrics']).split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1];
    if (!verb) continue;
    const n = Number(line.slice(line.lastIndexOf(' ') + 1));
    const resource = /[{,]resource="([^"]*)"/.exec(line)?.[1] ?? '';
    const sub = /subresource="([^"]+)"/.exec(line)?.[1];
    const key = `${verb} ${resource}${sub ? `/${sub}` : ''}`;
    counts.byVerb[verb] = (counts.byVerb[verb] ?? 0) + n;
    counts.byResource[key] = (counts.byResource[key] ?? 0) + n;
  }
  return counts;
}

export function difference(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([verb, n]) => [verb, n - (before[verb] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
}
