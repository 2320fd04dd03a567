// The benchmark's chart: time to converge, to delete, and CPU per contender, as a PNG beside the
// results. Vega-Lite draws it (as SVG, no canvas needed); Debian's Chromium turns the SVG into a PNG.
import { writeFileSync } from 'node:fs';
import { chromium } from 'playwright-core';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { chromiumArgs, ensureChromium } from '../../tools/local-stack/browser.js';
import type { ContenderName, ContenderResult } from './run.js';

const metrics: [string, (r: ContenderResult) => number | undefined][] = [
  ['converged (s)', (r) => r.convergedSeconds],
  ['machine CPU (s)', (r) => r.machineCpuSeconds],
  ['delete namespace (s)', (r) => r.deleteSeconds],
];

export function chartSpec(models: number, results: Partial<Record<ContenderName, ContenderResult>>): TopLevelSpec {
  const values = Object.entries(results).flatMap(([contender, r]) =>
    metrics.flatMap(([metric, get]) => {
      const value = get(r);
      return value === undefined ? [] : [{ contender, metric, value }];
    }),
  );
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: `bench:converge, ${models} objects`,
    data: { values },
    facet: { column: { field: 'metric', type: 'nominal', title: null, sort: metrics.map(([m]) => m) } },
    spec: {
      width: 180,
      height: 200,
      layer: [
        {
          mark: 'bar',
          encoding: {
            x: {
              field: 'contender',
              type: 'nominal',
              sort: ['floor', 'peer', 'operator'],
              title: null,
              axis: { labelAngle: 0 },
            },
            y: { field: 'value', type: 'quantitative', title: null },
            color: { field: 'contender', type: 'nominal', legend: null },
          },
        },
        {
          mark: { type: 'text', dy: -6 },
          encoding: {
            x: { field: 'contender', type: 'nominal', sort: ['floor', 'peer', 'operator'] },
            y: { field: 'value', type: 'quantitative' },
            text: { field: 'value', type: 'quantitative', format: '.0f' },
          },
        },
      ],
    },
    resolve: { scale: { y: 'independent' } },
    config: { background: 'white' },
  };
}

/** Renders the chart to `file` (PNG). */
export async function writeChart(
  file: string,
  models: number,
  results: Partial<Record<ContenderName, ContenderResult>>,
): Promise<void> {
  await renderPng(file, chartSpec(models, results));
}

/** Renders a Vega-Lite chart to `file` (PNG). */
export async function renderPng(file: string, spec: TopLevelSpec): Promise<void> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  const browser = await chromium.launch({ executablePath: ensureChromium(), args: chromiumArgs });
  try {
    const page = await browser.newPage({ deviceScaleFactor: 2 });
    await page.setContent(`<body style="margin:0">${svg}</body>`);
    writeFileSync(file, await page.locator('svg').screenshot());
  } finally {
    await browser.close();
  }
}
