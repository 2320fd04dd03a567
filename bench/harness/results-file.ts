import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where a benchmark writes its result, `bench/results/<date>-<parts>.json`, and the commit it ran at. */
export function resultsFile(parts: (string | number | undefined)[]): { file: string; date: string; commit: string } {
  const date = new Date().toISOString().slice(0, 10);
  const dir = fileURLToPath(new URL('../results', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const name = [date, ...parts.filter((p) => p !== undefined)].join('-');
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  return { file: path.join(dir, `${name}.json`), date, commit };
}
