import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import {
  imageReferencePattern,
  parseQuantity,
  serviceNamePattern,
  validateName,
  validateModel,
  validateSpec,
} from '../../src/core/validation.js';
import type { MachineModelSpec } from '../../src/core/api.js';
import { badInputs } from '../support/bad-inputs.js';
import { seedExample } from '../support/models.js';

describe('validateSpec', () => {
  it('accepts the seed example as written', () => {
    expect(validateSpec(seedExample.spec)).toEqual([]);
    expect(validateName(seedExample.metadata.name)).toEqual([]);
  });

  it.each(badInputs)('rejects $title', ({ name, spec, expect: words }) => {
    const errors = validateModel(name ?? 'ok', spec as Partial<MachineModelSpec>);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.join('; ')).toMatch(words);
  });

  it('takes whole numbers as quantities, as a Pod does, and refuses fractions and zero', () => {
    const resources = (cpu: unknown, memory: unknown) =>
      validateSpec({ image: 'nginx', modelPath: '/m', resources: { cpu, memory } } as Partial<MachineModelSpec>);
    expect(resources(2, 1073741824)).toEqual([]);
    expect(resources(1.5, '1Gi').join()).toMatch(/spec.resources.cpu must be a whole number or a quantity string/);
    expect(resources(0, '1Gi').join()).toMatch(/spec.resources.cpu must be greater than zero/);
  });

  it('parses resource quantities', () => {
    expect(parseQuantity('500m')).toBeCloseTo(0.5);
    expect(parseQuantity('1Gi')).toBe(2 ** 30);
    expect(parseQuantity('2')).toBe(2);
    expect(parseQuantity('1e3')).toBe(1000);
    expect(parseQuantity('-1Gi')).toBe(-(2 ** 30));
    expect(parseQuantity('lots')).toBeUndefined();
    expect(parseQuantity(' 1')).toBeUndefined();
  });

  it('accepts common image references and rejects malformed ones', () => {
    for (const ok of [
      'nginx',
      'nginx:1.25',
      'localhost:5000/team/model:v1',
      'ghcr.io/org/m@sha256:' + 'a'.repeat(64),
    ]) {
      expect(validateSpec({ image: ok, modelPath: '/m', resources: { cpu: '1', memory: '1Gi' } })).toEqual([]);
    }
    for (const bad of ['repo/UPPER', 'a b', 'repo:', ':tag', 'a//b']) {
      expect(validateSpec({ image: bad, modelPath: '/m', resources: { cpu: '1', memory: '1Gi' } }).join()).toMatch(
        /image/,
      );
    }
  });
});

describe('the CRD and validation.ts agree', () => {
  const crd = YAML.parse(
    readFileSync(fileURLToPath(new URL('../../crds/machinemodels.stable.example.com.yaml', import.meta.url)), 'utf8'),
  );
  const schema = crd.spec.versions[0].schema.openAPIV3Schema;

  it('uses the same image pattern', () => {
    expect(schema.properties.spec.properties.image.pattern).toBe(imageReferencePattern);
  });

  it('uses the same name rule', () => {
    const rules = schema['x-kubernetes-validations'].map((r: { rule: string }) => r.rule).join(' ');
    expect(rules).toContain(serviceNamePattern);
    expect(rules).toContain('size() <= 63');
  });
});
