import { spawnSync } from 'node:child_process';
import { PrerequisiteError } from './install.js';

/** Debian packages the real node and the image builds use, installed with apt when missing (as root). */
export function ensureDebianPackages(packages: string[], log: (line: string) => void): void {
  const missing = packages.filter(
    (p) => spawnSync('dpkg-query', ['-W', '-f=${Status}', p], { encoding: 'utf8' }).stdout !== 'install ok installed',
  );
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new PrerequisiteError(`install the Debian packages ${missing.join(' ')} (apt-get install), or run as root.`);
  }
  log(`installing Debian packages: ${missing.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    spawnSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...missing], { env, encoding: 'utf8' });
  let r = install();
  // A fresh machine's package lists may be missing or stale.
  if (r.status !== 0) {
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore' });
    r = install();
  }
  if (r.status !== 0) {
    throw new PrerequisiteError(`apt-get install ${missing.join(' ')} failed: ${r.stderr.trim().split('\n').pop()}`);
  }
}
