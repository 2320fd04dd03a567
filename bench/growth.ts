// How the operator's cost grows with the number of models, beside the peer's: peak RSS and controller
// CPU per object against N (log scale), from bench:converge results files, as one chart.
// Usage: npm run bench:growth -- bench/results/<a>.json bench/results/<b>.json … [--out file.png]
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import type { TopLevelSpec } from 'vega-lite';
import { renderPng } from './harness/chart.js';
import type { ContenderName, ContenderResult } from './harness/run.js';

interface Report {
  models: number;
  temporal?: string;
  results: Partial<Record<ContenderName, ContenderResult>>;
}

const cmd = new Command('bench:growth')
  .argument('<results...>', 'results files of bench:converge, one per N')
  .option('--out <file>', 'the chart', 'bench/results/growth.png')
  .parse();
const out = cmd.opts<{ out: string }>().out;

const rows = cmd.args.flatMap((file) => {
  const report = JSON.parse(readFileSync(file, 'utf8')) as Report;
  return (['peer', 'operator'] as const).flatMap((contender) => {
    const r = report.results[contender];
    if (!r) return [];
    const who = contender === 'operator' ? `operator (${report.temporal ?? 'dev'} Temporal)` : 'peer';
    const cpu = r.cpuSeconds[contender] ?? NaN;
    return [
      { who, models: report.models, metric: 'peak RSS (MiB)', value: r.peakRssMiB[contender] },
      { who, models: report.models, metric: 'CPU per object (ms)', value: (cpu * 1000) / report.models },
    ];
  });
});

const spec: TopLevelSpec = {
  $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
  title: 'How the controller grows with N',
  data: { values: rows },
  facet: { column: { field: 'metric', type: 'nominal', title: null } },
  spec: {
    width: 260,
    height: 220,
    layer: [
      {
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'models', type: 'quantitative', scale: { type: 'log' }, title: 'objects (N)' },
          y: { field: 'value', type: 'quantitative', title: null },
          color: { field: 'who', type: 'nominal', title: null, legend: { labelLimit: 400 } },
        },
      },
      {
        mark: { type: 'text', dy: -8 },
        encoding: {
          x: { field: 'models', type: 'quantitative', scale: { type: 'log' } },
          y: { field: 'value', type: 'quantitative' },
          text: { field: 'value', type: 'quantitative', format: '.0f' },
          color: { field: 'who', type: 'nominal' },
        },
      },
    ],
  },
  resolve: { scale: { y: 'independent' } },
  config: { background: 'white' },
};
await renderPng(out, spec);
console.log(out);
