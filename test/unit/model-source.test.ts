import { describe, expect, it } from 'vitest';
import { artifactName, fetchFailureKind, modelLocation, modelSource } from '../../src/core/model-source.js';
import { deployedRevision, revisionName, revisionOf, sameRevision, stableRevisionFor } from '../../src/core/rollout.js';
import { buildDeployment, defaultBuildOptions } from '../../src/core/desired-state.js';
import { validateSpec } from '../../src/core/validation.js';

const sum = 'ab'.repeat(32);

describe('a model source and its location', () => {
  it('names a baked-in model by its path, as before storage existed (the same revision names)', () => {
    const spec = { image: 'r/m:1', modelPath: '/models/m.pb' };
    expect(modelLocation(spec)).toBe('/models/m.pb');
    expect(revisionOf(spec)).toEqual({ image: 'r/m:1', modelPath: '/models/m.pb' });
    expect(revisionName(revisionOf(spec))).toBe(revisionName({ image: 'r/m:1', modelPath: '/models/m.pb' }));
    expect(modelSource('/models/m.pb')).toEqual({ kind: 'path', path: '/models/m.pb' });
  });

  it('names a stored model by its URI and sum, which read back as the source', () => {
    const location = modelLocation({ storageUri: 's3://models/digits/v1/digits.joblib', sha256: sum });
    expect(location).toBe(`s3://models/digits/v1/digits.joblib@sha256:${sum}`);
    expect(modelSource(location)).toEqual({
      kind: 's3',
      uri: 's3://models/digits/v1/digits.joblib',
      bucket: 'models',
      key: 'digits/v1/digits.joblib',
      sha256: sum,
    });
    expect(modelSource('https://example.com/m/model.onnx')).toEqual({
      kind: 'https',
      uri: 'https://example.com/m/model.onnx',
    });
    expect(modelSource('pvc://weights/team/m.pt')).toEqual({
      kind: 'pvc',
      uri: 'pvc://weights/team/m.pt',
      claim: 'weights',
      path: 'team/m.pt',
    });
  });

  it('makes a new revision of a new storageUri or sha256', () => {
    const a = revisionName(revisionOf({ image: 'r/m:1', storageUri: 's3://models/a.joblib' }));
    const b = revisionName(revisionOf({ image: 'r/m:1', storageUri: 's3://models/b.joblib' }));
    const c = revisionName(revisionOf({ image: 'r/m:1', storageUri: 's3://models/a.joblib', sha256: sum }));
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it('goes out as a canary under a rollout plan: the stable Deployment keeps the artifact it runs', () => {
    const rollout = { strategy: 'Canary' as const, steps: [{ weight: 20 }] };
    const base = { image: 'r/m:1', resources: { cpu: '1', memory: '1Gi' }, rollout };
    const v1 = { ...base, storageUri: 's3://models/v1/m.joblib', sha256: sum };
    const v2 = { ...base, storageUri: 's3://models/v2/m.joblib', sha256: 'ef'.repeat(32) };
    const ref = { namespace: 'ml', name: 'm', uid: 'u' };
    const running = deployedRevision(buildDeployment(ref, v1, defaultBuildOptions));
    expect(running).toEqual(revisionOf(v1));
    const stable = stableRevisionFor(v2, running, undefined);
    expect(sameRevision(stable, revisionOf(v1))).toBe(true);
    expect(sameRevision(revisionOf(v2), stable)).toBe(false);
  });

  it('reads the revision a Deployment runs from MODEL_SOURCE before MODEL_PATH', () => {
    const d = (env: { name: string; value: string }[]) => ({
      spec: { template: { spec: { containers: [{ image: 'r/m:1', env }] } } },
    });
    expect(deployedRevision(d([{ name: 'MODEL_PATH', value: '/m' }]))).toEqual({ image: 'r/m:1', modelPath: '/m' });
    expect(
      deployedRevision(
        d([
          { name: 'MODEL_PATH', value: '/mnt/models/x/m' },
          { name: 'STORAGE_URI', value: 's3://models/m' },
          { name: 'MODEL_SOURCE', value: 's3://models/m' },
        ]),
      ),
    ).toEqual({ image: 'r/m:1', modelPath: 's3://models/m' });
  });

  it('names the mounted file as the URI does, never hidden, never longer than a file name may be', () => {
    const a = modelSource(`s3://models/a/digits.joblib@sha256:${sum}`);
    if (a.kind !== 's3') throw new Error('not s3');
    expect(artifactName(a)).toBe('digits.joblib');
    const long = modelSource(`s3://models/a/${'x'.repeat(300)}.joblib`);
    if (long.kind !== 's3') throw new Error('not s3');
    expect(artifactName(long)).toHaveLength(200);
    expect(artifactName(long).endsWith('.joblib')).toBe(true);
    const odd = modelSource('https://example.com/%2E%2E');
    if (odd.kind !== 'https') throw new Error('not https');
    expect(artifactName(odd)).toBe('model');
    // No leading dot: never a hidden file.
    const hidden = modelSource('s3://models/a/.fetch');
    if (hidden.kind !== 's3') throw new Error('not s3');
    expect(artifactName(hidden)).toBe('fetch');
  });

  it('retries what passes (5xx, throttling, timeouts) and reports what needs a person', () => {
    expect([500, 502, 503, 429, 408].map(fetchFailureKind)).toEqual(Array(5).fill('retrying'));
    expect([400, 401, 403, 404].map(fetchFailureKind)).toEqual(Array(4).fill('unavailable'));
  });

  it('accepts a stored model without modelPath', () => {
    const base = { image: 'r/m:1', resources: { cpu: '1', memory: '1Gi' } };
    expect(
      validateSpec({ ...base, storageUri: 's3://models/digits.joblib', sha256: sum, storageSecret: 'store' }),
    ).toEqual([]);
    expect(validateSpec({ ...base, storageUri: 'pvc://weights/digits.joblib' })).toEqual([]);
    expect(validateSpec({ ...base, storageUri: 'https://example.com/digits.joblib' })).toEqual([]);
  });
});
