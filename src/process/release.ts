// This build's release: package.json's version, read where the build put it (the repository, or the
// image's /app), so no version in the code is a literal that a release can leave behind.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function packageVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'machinemodel-operator' && pkg.version) return pkg.version;
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error("machinemodel-operator's package.json is not above this module");
    dir = up;
  }
}

export const releaseVersion = packageVersion();
