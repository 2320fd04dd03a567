// Installs of the local stack's components: one process at a time builds a component, and another that
// needs it meanwhile (the PostgreSQL smoke while the test run's prebuild is under way) waits for that
// build instead of starting its own or taking a half-built one. Needs Go, as the stack does; not the stack.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { componentDir, type GoComponent } from '../../tools/local-stack/components.js';
import { ensureInstalled } from '../../tools/local-stack/install.js';

const moduleDir = mkdtempSync(path.join(os.tmpdir(), 'install-lock-'));
writeFileSync(path.join(moduleDir, 'go.mod'), 'module example.com/hello\n\ngo 1.22\n');
writeFileSync(path.join(moduleDir, 'main.go'), 'package main\n\nfunc main() { println("hello") }\n');
const hello: GoComponent = {
  kind: 'go',
  name: `install-lock-test-${randomUUID().slice(0, 8)}`,
  version: '0.0.0',
  moduleDir,
  target: '.',
  binary: 'hello',
  purpose: 'a test of the install lock',
  firstBuild: 'a second',
};

afterAll(() => {
  for (const dir of [moduleDir, componentDir(hello)]) rmSync(dir, { recursive: true, force: true });
});

it('builds a component once when two installs of it overlap, the second waiting for the first', async () => {
  const lines: string[] = [];
  const log = (line: string) => lines.push(line);
  const [first, second] = await Promise.all([
    ensureInstalled(hello, log, { background: true }),
    ensureInstalled(hello, log),
  ]);
  expect(second).toBe(first);
  expect(lines.filter((l) => l.startsWith('building '))).toHaveLength(1);
  expect(lines.some((l) => l.startsWith('waiting for process'))).toBe(true);
});

it('stops a build when told, leaving the component missing and the lock free for the next install', async () => {
  const other: GoComponent = { ...hello, name: `${hello.name}-aborted` };
  const abort = new AbortController();
  const lines: string[] = [];
  const building = ensureInstalled(other, (l) => lines.push(l), { signal: abort.signal });
  abort.abort();
  await expect(building).rejects.toThrow();
  const bin = await ensureInstalled(other, () => undefined);
  expect(bin.endsWith('/bin/hello')).toBe(true);
  rmSync(componentDir(other), { recursive: true, force: true });
});
