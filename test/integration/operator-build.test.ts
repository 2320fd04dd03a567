// The compiled operator as the image runs it (`npm run build`, which `npm test` runs first): its entry
// carries its Kubernetes client in one bundle (deploy/build/operator-bundle.ts) and leaves Temporal's
// packages to node_modules. Every other integration test runs this same entry against real servers.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const entry = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
const importsOf = (code: string) => [...code.matchAll(/\bfrom\s*["']([^"']+)["']/g)].map((m) => m[1]);

it('bundles @kubernetes/client-node into the entry, and imports Temporal from node_modules', () => {
  const imports = importsOf(readFileSync(entry, 'utf8'));
  expect(imports.filter((i) => i?.startsWith('@kubernetes/'))).toEqual([]);
  expect(imports).toContain('@temporalio/worker');
  // Nothing of the operator's own tree is left to import: it is all in the bundle.
  expect(imports.filter((i) => i?.startsWith('.'))).toEqual([]);
});

it('loads as a whole and answers --help', () => {
  const run = spawnSync(process.execPath, [entry, '--help'], { encoding: 'utf8' });
  expect(run.status).toBe(0);
  expect(run.stdout).toContain('--readiness-recheck');
});
