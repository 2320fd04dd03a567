// How the operator's image runs Node, read from deploy/Dockerfile, so the benchmarks run it alike.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The image's NODE_OPTIONS (its `ENV NODE_OPTIONS="…"` line); empty without one. */
export function imageNodeOptions(): string {
  const file = fileURLToPath(new URL('../../deploy/Dockerfile', import.meta.url));
  return /^ENV NODE_OPTIONS="([^"]*)"$/m.exec(readFileSync(file, 'utf8'))?.[1] ?? '';
}
