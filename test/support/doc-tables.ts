// Reading the docs' tables and prose in tests that hold them to the code (test/unit/docs-*.test.ts).
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);

/** A file of the repository, by its path from the root. */
export function readRepoFile(path: string): string {
  return readFileSync(new URL(path, root), 'utf8');
}

/** A page's text with every run of whitespace one space: prose wraps anywhere. */
export function flattened(path: string): string {
  return readRepoFile(path).replace(/\s+/g, ' ');
}

/**
 * The rows of the first Markdown table in `path` after `after` (a heading or any text before the
 * table) whose header row starts with `firstHeader`, each a record keyed by the header's cells.
 */
export function tableRows(path: string, after: string, firstHeader: string): Record<string, string>[] {
  const page = readRepoFile(path);
  const from = page.indexOf(after);
  if (from < 0) throw new Error(`${path}: no "${after}"`);
  const lines = page.slice(from).split('\n');
  const start = lines.findIndex((l) => cellsOf(l)?.[0] === firstHeader);
  if (start < 0) throw new Error(`${path}: no table with the header "${firstHeader}" after "${after}"`);
  const header = cellsOf(lines[start]!)!;
  const rows: Record<string, string>[] = [];
  for (const line of lines.slice(start + 2)) {
    const cells = cellsOf(line);
    if (!cells) break;
    rows.push(Object.fromEntries(header.map((h, i) => [h, cells[i] ?? ''])));
  }
  return rows;
}

/** A table row's cells; a table may be indented under a list item. */
function cellsOf(line: string): string[] | undefined {
  const row = line.trim();
  if (!row.startsWith('|')) return undefined;
  return row
    .replace(/\\\|/g, '\u0000')
    .split('|')
    .slice(1, -1)
    .map((c) => c.trim().replace(/\u0000/g, '|'));
}

/** The `code` spans of a cell, in order. */
export function codeSpans(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
}
