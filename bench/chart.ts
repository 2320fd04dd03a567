// Draws the chart of a bench:converge results file again, beside it (same name, .png).
// Usage: npm run bench:chart -- bench/results/<date>-<N>.json
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { writeChart } from './harness/chart.js';

const cmd = new Command('bench:chart').argument('<results>', 'a results file that bench:converge wrote').parse();
const file = cmd.args[0]!;
const report = JSON.parse(readFileSync(file, 'utf8')) as { models: number; results: Parameters<typeof writeChart>[2] };
const png = file.replace(/\.json$/, '.png');
await writeChart(png, report.models, report.results);
console.log(png);
