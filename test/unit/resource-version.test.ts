import { describe, expect, it } from 'vitest';
import { compareResourceVersions, newerThan } from '../../src/core/resource-version.js';

describe('resource versions (KEP-5504)', () => {
  it.each([
    ['9', '10', -1],
    ['10', '9', 1],
    ['123', '123', 0],
    ['123456789012345678901', '123456789012345678902', -1],
    ['200', '199', 1],
  ] as const)('%s against %s', (a, b, expected) => {
    expect(compareResourceVersions(a, b)).toBe(expected);
  });

  it.each([
    ['', '1'],
    ['01', '1'],
    ['0', '1'],
    ['abc', '1'],
    [undefined, '1'],
  ])('%j is not comparable', (a, b) => {
    expect(compareResourceVersions(a, b)).toBeUndefined();
  });
});

describe('the resource version just newer than another', () => {
  it('is one more, without a limit on length', () => {
    expect(newerThan('99')).toBe('100');
    expect(newerThan('123456789012345678901')).toBe('123456789012345678902');
    expect(compareResourceVersions(newerThan('99'), '99')).toBe(1);
  });

  it('does not exist for what is not comparable', () => {
    expect(newerThan('x1')).toBeUndefined();
    expect(newerThan(undefined)).toBeUndefined();
  });
});
