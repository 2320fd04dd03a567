import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { patches, type PatchRecord } from '../../workflows/patches.js';
import { patchMarkersOf, type RecordedHistory } from '../support/histories.js';
import { overduePatches, releasesIn } from '../support/release-policy.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (dir: string) =>
  readdirSync(path.join(root, dir))
    .filter((f) => /\.(ts|json)$/.test(f))
    .map((f) => readFileSync(path.join(root, dir, f), 'utf8'));
const table = patches as Record<string, PatchRecord>;

describe('the patch table (workflows/patches.ts)', () => {
  const code = read('workflows').join('\n');
  const histories = read('test/histories').filter((h) => h.startsWith('{'));

  it('lists every patch id the workflows use, and the workflows use every listed id', () => {
    // Ids are typed PatchId where they are declared; find them as string literals next to that type.
    const used = new Set([...code.matchAll(/: PatchId = '([^']+)'/g)].map((m) => m[1]));
    expect([...used].sort()).toEqual(Object.keys(table).sort());
    // No patched() call takes a literal that bypasses the table.
    expect(code.match(/(patched|deprecatePatch)\('/g)).toBeNull();
  });

  it('has a recorded history with the marker of every patch', () => {
    const marked = new Set(histories.flatMap((h) => patchMarkersOf(JSON.parse(h) as RecordedHistory)));
    expect(Object.keys(table).filter((id) => !marked.has(id))).toEqual([]);
  });

  it('holds no patch past the release after the next one (CHANGELOG.md, package.json)', () => {
    const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
    const releases = releasesIn(readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8'));
    expect(releases).toContain('0.1.0');
    expect(overduePatches(table, releases, version)).toEqual([]);
  });
});

describe('the patch policy', () => {
  const patch = (addedIn: string): PatchRecord => ({
    workflow: 'machineModelWorkflow',
    guards: 'x',
    addedIn,
    stage: 'patched',
  });

  const deprecated = (addedIn: string): PatchRecord => ({ ...patch(addedIn), stage: 'deprecated' });

  it('lets a patch live through its release, patched, and the next one, deprecated', () => {
    expect(overduePatches({ p: patch('0.2.0') }, ['0.1.0'], '0.2.0')).toEqual([]);
    expect(overduePatches({ p: patch('0.2.0') }, ['0.1.0', '0.2.0'], '0.2.0')).toEqual([]);
    expect(overduePatches({ p: deprecated('0.2.0') }, ['0.1.0', '0.2.0'], '0.3.0')).toEqual([]);
    expect(overduePatches({ p: deprecated('0.2.0') }, ['0.1.0', '0.2.0', '0.3.0'], '0.3.0')).toEqual([]);
  });

  it('fails a patch still patched one release after it was added', () => {
    expect(overduePatches({ p: patch('0.2.0') }, ['0.1.0', '0.2.0'], '0.3.0')).toEqual([
      'p: added in 0.2.0, must be deprecated in 0.3.0 (deprecatePatch, the old path deleted)',
    ]);
  });

  it('fails a patch added in a release later than package.json says', () => {
    expect(overduePatches({ p: patch('0.3.0') }, ['0.1.0', '0.2.0'], '0.2.0')).toEqual([
      "p: added in 0.3.0, later than package.json's 0.2.0 (set the release it ships in)",
    ]);
  });

  it('fails it once the release after that is prepared', () => {
    expect(overduePatches({ p: deprecated('0.2.0') }, ['0.1.0', '0.2.0', '0.3.0'], '0.3.1')).toEqual([
      'p: added in 0.2.0, must be gone by 0.3.1 (deprecated still)',
    ]);
  });

  it('fails a patch that names no release', () => {
    expect(overduePatches({ p: patch('the commit that adds it') }, ['0.1.0'], '0.1.0')).toHaveLength(1);
  });

  it('reads releases from the changelog headings', () => {
    expect(
      releasesIn('# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n\n## [0.1.0] - 2026-11-24\n'),
    ).toEqual(['0.2.0', '0.1.0']);
  });
});
