// The operator's image is one release everywhere: the installs' Deployment and the model cache's
// DaemonSet name package.json's version, the image built here carries it, the plugin reports it,
// and no product code names a version of the image as a literal.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { releaseVersion } from '../../src/process/release.js';
import { operatorImage } from '../../tools/images/catalog.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const { version } = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(path.join(root, dir)).flatMap((name) => {
    const rel = path.join(dir, name);
    return statSync(path.join(root, rel)).isDirectory() ? files(rel, ext) : ext.test(name) ? [rel] : [];
  });
}

describe("the operator's image and the release", () => {
  it("is package.json's version in every manifest of deploy/ that runs it", () => {
    const named = files('deploy', /\.ya?ml$/).flatMap((f) =>
      [...readFileSync(path.join(root, f), 'utf8').matchAll(/image:\s*(\S*machinemodel-operator:\S+)/g)].map(
        (m) => [f, m[1]] as const,
      ),
    );
    expect(named.map(([f]) => f).sort()).toEqual([
      'deploy/model-cache/daemonset.yaml',
      'deploy/operator/deployment.yaml',
    ]);
    for (const [file, image] of named) expect(`${file}: ${image}`).toBe(`${file}: machinemodel-operator:${version}`);
  });

  it('is the version the image built here is tagged with and the plugin reports', () => {
    expect(operatorImage.aliases).toEqual([`machinemodel-operator:${version}`]);
    expect(operatorImage.ref.endsWith(`:${version}`)).toBe(true);
    expect(releaseVersion).toBe(version);
  });

  it('is never a literal in the product code', () => {
    for (const f of [...files('src', /\.ts$/), ...files('activities', /\.ts$/), ...files('workflows', /\.ts$/)])
      expect(
        `${f}: ${readFileSync(path.join(root, f), 'utf8').match(/machinemodel-operator:\d[\w.-]*/)?.[0] ?? ''}`,
      ).toBe(`${f}: `);
  });
});
