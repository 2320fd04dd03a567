// Requests the apiserver has served, by verb, from its own /metrics (apiserver_request_total).
import { kubectlRun, type StackInfo } from '../../deploy/local/stack.js';

export function apiserverRequestsByVerb(stack: StackInfo): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const line of kubectlRun(stack, ['get', '--raw', '/metrics']).split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1];
    if (verb) totals[verb] = (totals[verb] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return totals;
}

export function difference(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([verb, n]) => [verb, n - (before[verb] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
}
