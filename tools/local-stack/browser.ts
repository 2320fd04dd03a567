// Debian's Chromium for the Web UI checks (playwright-core drives it; no browser download).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { PrerequisiteError } from './install.js';

export const chromiumPath = '/usr/bin/chromium';

/** Flags for a headless Chromium on a machine without a network beyond loopback. */
export const chromiumArgs = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function ensureChromium(log: (line: string) => void = console.error): string {
  if (existsSync(chromiumPath)) return chromiumPath;
  if (process.getuid?.() !== 0) {
    throw new PrerequisiteError(
      'Chromium is needed for the Web UI checks: install it with `sudo apt-get install chromium`.',
    );
  }
  log('installing Debian chromium for the Web UI checks');
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'ignore' });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'chromium'], {
    stdio: 'ignore',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return chromiumPath;
}
