// docs/rollouts.md's verdict table, row by row, against judgeCanary: every combination of readiness,
// traffic and moment is in the table, and the function decides each as the table says.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ContainerTrouble } from '../../src/core/container-troubles.js';
import { judgeCanary, type CanaryHealth, type TrafficSample } from '../../src/core/rollout.js';

const analysis = { maxErrorRatePercent: 5, minRequests: 20 };

const readiness: Record<string, Omit<CanaryHealth, 'traffic'>> = {
  ready: { readyReplicas: 2, desiredReplicas: 2 },
  loading: { readyReplicas: 0, desiredReplicas: 2 },
  'unready again': {
    readyReplicas: 1,
    desiredReplicas: 2,
    trouble: { kind: 'not-ready', pods: 1, container: 'model', probeMessage: 'HTTP probe failed with statuscode: 503' },
  },
  'needs a person': {
    readyReplicas: 0,
    desiredReplicas: 2,
    trouble: {
      kind: 'image-pull',
      pods: 2,
      container: 'model',
      image: 'registry.example/m:9',
      reason: 'ImagePullBackOff',
      message: 'not found',
    } satisfies ContainerTrouble,
  },
};

const traffic: Record<string, TrafficSample | undefined> = {
  within: { requests: 100, errors: 5 },
  over: { requests: 100, errors: 6 },
  'too few': { requests: 19, errors: 0 },
  'not reported': undefined,
};

const moments: Record<string, boolean> = { pause: false, 'end of step': true };

function tableRows(): string[][] {
  const page = readFileSync(new URL('../../docs/rollouts.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('## The verdict table'));
  const table = section.slice(section.indexOf('| Readiness'));
  return table
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .slice(2)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

describe("docs/rollouts.md's verdict table", () => {
  const rows = tableRows();

  it('has one row for every combination of readiness, traffic and moment', () => {
    const keys = rows.map(([r, t, m]) => `${r}/${t}/${m}`);
    const all = Object.keys(readiness).flatMap((r) =>
      Object.keys(traffic).flatMap((t) => Object.keys(moments).map((m) => `${r}/${t}/${m}`)),
    );
    expect(new Set(keys)).toEqual(new Set(all));
    expect(keys).toHaveLength(all.length);
  });

  it.each(rows.map((row) => [row.slice(0, 3).join(', '), row] as const))('%s', (_, [r, t, m, verdict]) => {
    const health = { ...readiness[r!]!, ...(traffic[t!] ? { traffic: traffic[t!] } : {}) };
    expect(judgeCanary(analysis, health, moments[m!]!).kind).toBe(verdict);
  });

  it('passes no step with the canary not ready', () => {
    const passing = rows.filter(([r, , m, v]) => m === 'end of step' && v === 'healthy');
    expect(passing.every(([r]) => r === 'ready')).toBe(true);
  });
});
