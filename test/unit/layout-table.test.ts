// docs/contributing.md's Layout table against the tree: every folder of src/, deploy/ and tools/ has
// its row, every top-level folder of code is covered, and every path and file the table names exists.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Row {
  /** The paths of the first column, e.g. `src/core/`, `src/*.ts`, `tools/record-histories.ts`. */
  paths: string[];
  /** The backticked names of the other columns. */
  named: string[];
}

const backticked = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** The first table after the "## Layout" heading. */
function layoutRows(markdown: string): Row[] {
  const section = markdown.split(/^## Layout$/m)[1]?.split(/^## /m)[0] ?? '';
  const table = section
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .slice(2); // the header and its rule
  return table.map((line) => {
    const [first = '', ...rest] = line.split('|').slice(1, -1);
    return { paths: backticked(first), named: rest.flatMap(backticked) };
  });
}

const fileExtensions = /\.(ts|js|cjs|mjs|md|json|ya?ml|lua|py|go|mod|proto|txt)$/;

/** A backticked name that means a file or folder: a path with a slash or a file name with its extension. */
function pathLike(name: string): boolean {
  if (/\s/.test(name) || name.startsWith('.') || name.startsWith('@')) return false;
  return name.includes('/') || fileExtensions.test(name) || name === 'Dockerfile';
}

/** Folders a checkout holds that are not the project's (.gitignore's plain names), nor code. */
function ignoredFolders(): Set<string> {
  const ignored = readFileSync(path.join(root, '.gitignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim().replace(/\/$/, ''))
    .filter((line) => /^[\w.-]+$/.test(line));
  return new Set([...ignored, 'docs']);
}

function subfolders(folder: string): string[] {
  return readdirSync(path.join(root, folder), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
    .map((entry) => entry.name);
}

/** Every file and folder under `folder`, relative to the root. */
function tree(folder: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(path.join(root, folder), { withFileTypes: true })) {
    const relative = path.posix.join(folder, entry.name);
    found.push(relative);
    if (entry.isDirectory()) found.push(...tree(relative));
  }
  return found;
}

function exists(relative: string): boolean {
  const star = relative.indexOf('*');
  if (star < 0) return existsSync(path.join(root, relative));
  const dir = path.posix.dirname(relative);
  const pattern = new RegExp(`^${path.posix.basename(relative).replace(/\./g, '\\.').replace(/\*/g, '[^/]*')}$`);
  return existsSync(path.join(root, dir)) && readdirSync(path.join(root, dir)).some((name) => pattern.test(name));
}

/**
 * Where a name of a row is: a path from the root when it starts with a top-level folder, else a file or
 * folder somewhere under the row's own folder (`proto/` and `csi.proto` in `src/csi/`).
 */
function resolves(name: string, rowPath: string): boolean {
  const bare = name.replace(/\/$/, '');
  const topLevel = bare.split('/')[0]!;
  if (name.includes('/') && existsSync(path.join(root, topLevel)) && exists(bare)) return true;
  const folder = rowPath.endsWith('/') ? rowPath.replace(/\/$/, '') : path.posix.dirname(rowPath);
  return tree(folder).some((found) => found === `${folder}/${bare}` || found.endsWith(`/${bare}`));
}

const rows = layoutRows(readFileSync(path.join(root, 'docs/contributing.md'), 'utf8'));
const listed = new Set(rows.flatMap((r) => r.paths));

describe('docs/contributing.md, the Layout table', () => {
  it('is found, one path or more a row', () => {
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) expect(row.paths.length, JSON.stringify(row)).toBeGreaterThan(0);
  });

  it('names only paths that exist', () => {
    const missing = [...listed].filter((p) => !exists(p));
    expect(missing).toEqual([]);
  });

  it('has a row for every folder of src/, deploy/ and tools/', () => {
    const folders = ['src', 'deploy', 'tools'].flatMap((top) => subfolders(top).map((d) => `${top}/${d}/`));
    expect(folders.filter((f) => !listed.has(f))).toEqual([]);
  });

  it('covers every top-level folder of code', () => {
    const ignored = ignoredFolders();
    const folders = subfolders('.').filter((d) => !ignored.has(d));
    const uncovered = folders.filter((d) => ![...listed].some((p) => p === `${d}/` || p.startsWith(`${d}/`)));
    expect(uncovered).toEqual([]);
  });

  it('names only files and folders that exist, each under its row', () => {
    const missing = rows.flatMap((row) =>
      row.named.filter(pathLike).flatMap((name) => (resolves(name, row.paths[0]!) ? [] : [`${row.paths[0]}: ${name}`])),
    );
    expect(missing).toEqual([]);
  });

  it('reads what it checks (a sample of the table)', () => {
    const sharding = rows.find((r) => r.paths.includes('src/sharding/'));
    expect(sharding?.named).toContain('shard-leases.ts');
    expect(pathLike('kubectl apply -k')).toBe(false);
    expect(pathLike('src/csi/proto/csi.proto')).toBe(true);
  });
});
