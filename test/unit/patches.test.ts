import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { patches } from '../../workflows/patches.js';
import { patchMarkersOf, type RecordedHistory } from '../support/histories.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (dir: string) =>
  readdirSync(path.join(root, dir))
    .filter((f) => /\.(ts|json)$/.test(f))
    .map((f) => readFileSync(path.join(root, dir, f), 'utf8'));

describe('the patch table (workflows/patches.ts)', () => {
  const code = read('workflows').join('\n');
  const histories = read('test/histories').filter((h) => h.startsWith('{'));

  it('lists every patch id the workflows use, and the workflows use every listed id', () => {
    // Ids are typed PatchId where they are declared; find them as string literals next to that type.
    const used = new Set([...code.matchAll(/: PatchId = '([^']+)'/g)].map((m) => m[1]));
    expect([...used].sort()).toEqual(Object.keys(patches).sort());
    // No patched() call takes a literal that bypasses the table.
    expect(code.match(/(patched|deprecatePatch)\('/g)).toBeNull();
  });

  it.each(Object.keys(patches))('has a recorded history that carries the marker of %s', (id) => {
    expect(histories.flatMap((h) => patchMarkersOf(JSON.parse(h) as RecordedHistory))).toContain(id);
  });
});
