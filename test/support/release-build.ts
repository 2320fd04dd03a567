// The operator of an earlier release, built from this repository's history as its own checkout would
// build it (npm install, npm run build), for upgrade tests. Kept in the cache, one directory a release.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from '../../tools/local-stack/components.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface Release {
  version: string;
  commit: string;
}

/** The releases CHANGELOG.md names with the commit each was cut from, oldest first. */
export function releases(): Release[] {
  const changelog = readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8');
  const found = [...changelog.matchAll(/^## \[(\d+\.\d+\.\d+)\][^\n]*\n+Commit `([0-9a-f]{7,40})`/gm)];
  if (found.length === 0)
    throw new Error('CHANGELOG.md names no release with its commit ("## [x.y.z] …" then "Commit `<sha>`")');
  return found.map((m) => ({ version: m[1]!, commit: m[2]! })).reverse();
}

function run(cmd: string, args: string[], cwd: string): void {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}:\n${r.stderr || r.stdout}`);
}

/** The release's checkout with `dist/` built; made on first use (npm install and a build: a minute or two). */
export function releaseBuild({ version, commit }: Release): string {
  const dir = path.join(cacheRoot, 'releases', `${version}-${commit}`);
  if (existsSync(path.join(dir, 'dist', 'src', 'main.js'))) return dir;
  try {
    execFileSync('git', ['-C', root, 'cat-file', '-e', `${commit}^{commit}`], { stdio: 'ignore' });
  } catch {
    throw new Error(
      `commit ${commit} of release ${version} is not in this checkout (a shallow clone?): ` +
        `fetch the history (git fetch --unshallow) to run the upgrade test`,
    );
  }
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const archive = spawnSync('git', ['-C', root, 'archive', '--format=tar', commit], { maxBuffer: 1024 ** 3 });
  if (archive.status !== 0) throw new Error(`git archive ${commit} failed: ${archive.stderr.toString()}`);
  const untar = spawnSync('tar', ['-x', '-C', partial], { input: archive.stdout });
  if (untar.status !== 0) throw new Error(`unpacking ${commit} failed: ${untar.stderr.toString()}`);
  run('npm', ['install', '--no-audit', '--no-fund'], partial);
  run('npm', ['run', '-s', 'build'], partial);
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  return dir;
}
