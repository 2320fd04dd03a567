import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { cacheRoot } from '../local-stack/components.js';

/** An npm package unpacked into the cache (`npm pack`, then tar), for an image that needs it as files. */
export async function npmPackage(name: string, version: string): Promise<string> {
  const dir = path.join(cacheRoot, 'images', `npm-${name}-${version}`);
  const unpacked = path.join(dir, 'package');
  if (existsSync(unpacked)) return unpacked;
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const tarball = execFileSync('npm', ['pack', `${name}@${version}`, '--silent', '--pack-destination', partial], {
    encoding: 'utf8',
  }).trim();
  execFileSync('tar', ['-xzf', path.join(partial, tarball), '-C', partial]);
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  return unpacked;
}
