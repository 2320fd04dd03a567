// What users read off a model and the operator, against the code: the `Ready` reasons of containers
// and artifacts in trouble with their phase (docs/usage.md, docs/model-storage.md, README.md), the
// metrics (docs/usage.md, "Metrics"), and mmctl's commands and exit codes (docs/usage.md, "mmctl").
import { describe, expect, it } from 'vitest';
import type { Counter } from 'prom-client';
import { exitCodes } from '../../src/cli/exit-codes.js';
import { needsAPerson, troubleReasons, type ContainerTrouble } from '../../src/core/container-troubles.js';
import { createMetrics } from '../../src/process/metrics.js';
import { ReconcileMetrics } from '../../src/process/reconcile-metrics.js';
import { codeSpans, flattened, readRepoFile, tableRows } from '../support/doc-tables.js';

describe('the tables of `Ready` reasons for containers and artifacts in trouble', () => {
  const reasonTables = {
    'docs/usage.md': tableRows('docs/usage.md', '**When containers fail**', 'what happened'),
    'docs/model-storage.md': tableRows(
      'docs/model-storage.md',
      '## How the artifact reaches the Pods',
      'what happened',
    ),
    'README.md': tableRows('README.md', '## Using it', 'what happened'),
  };
  const kindOf = new Map(Object.entries(troubleReasons).map(([kind, reason]) => [reason, kind]));

  it.each(Object.entries(reasonTables))('%s names only reasons the operator gives, each with its phase', (_, rows) => {
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      const reason = codeSpans(row['`Ready` reason']!)[0]!;
      const kind = kindOf.get(reason);
      expect(kind, `${reason} is not in troubleReasons`).toBeDefined();
      const phase = needsAPerson({ kind } as ContainerTrouble) ? 'Failed' : 'Deploying';
      expect(codeSpans(row.phase!)[0], reason).toBe(phase);
    }
  });

  it('has every reason in usage.md or model-storage.md', () => {
    const documented = new Set(
      [...reasonTables['docs/usage.md'], ...reasonTables['docs/model-storage.md']].map(
        (row) => codeSpans(row['`Ready` reason']!)[0],
      ),
    );
    expect(Object.values(troubleReasons).filter((r) => !documented.has(r))).toEqual([]);
  });
});

describe("docs/usage.md's table of metrics", () => {
  const prefix = 'machinemodel_operator';
  const rows = tableRows('docs/usage.md', '## Metrics', 'metric');
  /** `name{label,label}` spans; a name that starts with `_` is the prefix's. */
  const documented = new Map(
    rows
      .flatMap((r) => codeSpans(r.metric!))
      .map((span) => {
        const [, name, labels] = /^([\w]+)(?:\{([\w,]+)\})?$/.exec(span)!;
        return [name!.startsWith('_') ? `${prefix}${name}` : name!, labels?.split(',') ?? []] as const;
      }),
  );

  it("has every metric the operator exports besides Node's process metrics, with its labels, and no other", async () => {
    const registry = createMetrics({});
    new ReconcileMetrics(registry);
    const exported = (await registry.getMetricsAsJSON())
      .map((m) => m.name)
      .filter((name) => !name.startsWith(`${prefix}_process_`) && !name.startsWith(`${prefix}_nodejs_`));
    expect([...documented.keys()].sort()).toEqual(exported.sort());
    for (const name of exported) {
      const metric = registry.getSingleMetric(name) as unknown as Counter & { labelNames?: string[] };
      expect(documented.get(name), name).toEqual(metric.labelNames ?? []);
    }
  });
});

describe("docs/usage.md's mmctl", () => {
  const source = readRepoFile('src/mmctl.ts');

  it('has every command, rollout action and option of mmctl in its table', () => {
    const column = tableRows('docs/usage.md', '## mmctl', 'command')
      .map((r) => codeSpans(r.command!).join(' '))
      .join(' ');
    const words = new Set(column.split(/[\s|[\]]+/));
    const commands = [...source.matchAll(/\.command\('(\w+)'\)/g)].map((m) => m[1]!);
    const steering = /const steering[^{]*\{([^}]*)\}/.exec(source)![1]!;
    const actions = [...steering.matchAll(/^\s*(\w+):/gm)].map((m) => m[1]!);
    // An option is named by its long or its short form (`-n <ns>`).
    const options = [...source.matchAll(/(?:\.option\(|new Option\()'(?:(-\w), )?(--[\w-]+)/g)]
      .filter((m) => m[2] !== '--output')
      .map((m) => (m[1] && words.has(m[1]) ? m[1] : m[2]!));
    expect(actions.length).toBeGreaterThan(0);
    expect([...commands, ...actions, ...options].filter((w) => !words.has(w))).toEqual([]);
  });

  it('states its exit codes', () => {
    const said = /Exit codes: (.*?); errors/.exec(flattened('docs/usage.md'))![1]!;
    const codes = new Map(said.split(', ').map((part) => [part.replace(/^\d+ /, ''), Number(/^\d+/.exec(part)![0])]));
    const meaning: Record<keyof typeof exitCodes, string> = {
      ok: 'done',
      failed: 'anything else',
      usage: 'bad arguments',
      unknownModel: 'no workflow for that model',
      temporalUnreachable: 'Temporal unreachable',
      timeout: '`resync --wait` timed out',
    };
    expect(Object.fromEntries(Object.entries(meaning).map(([key, words]) => [key, codes.get(words)]))).toEqual(
      exitCodes,
    );
    expect(codes.size).toBe(Object.keys(exitCodes).length);
  });
});
