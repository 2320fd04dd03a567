import { describe, expect, it } from 'vitest';
import { isEchoOf, mergedVersions, versionsOf } from '../../src/core/watch-echoes.js';

describe('watch echoes', () => {
  const written = ['Deployment/41', 'Service/42'];

  it('knows one event of a write the round made', () => {
    expect(isEchoOf(written, { source: 'Service', resourceVersion: '42' })).toBe(true);
    expect(isEchoOf(written, { source: 'Service', resourceVersion: '43' })).toBe(false);
    expect(isEchoOf(written, { source: 'Deployment', resourceVersion: '42' })).toBe(false);
  });

  it('takes a hint without a version for a change (a re-list, a resync)', () => {
    expect(versionsOf({ source: 'MachineModel' })).toBeUndefined();
    expect(isEchoOf(written, { source: 'MachineModel' })).toBe(false);
  });

  it('takes a coalesced hint for an echo only when every event is one', () => {
    const both = mergedVersions(
      { source: 'Deployment', resourceVersion: '41' },
      { source: 'Service', resourceVersion: '42' },
    );
    expect(both).toEqual(['Deployment/41', 'Service/42']);
    expect(isEchoOf(written, { source: 'Service', versions: both })).toBe(true);
    const withForeign = mergedVersions(
      { source: 'Service', versions: both },
      { source: 'Deployment', resourceVersion: '50' },
    );
    expect(isEchoOf(written, { source: 'Deployment', versions: withForeign })).toBe(false);
    expect(mergedVersions({ source: 'Service', versions: both }, { source: 'MachineModel' })).toBeUndefined();
    expect(isEchoOf(written, { source: 'Service', versions: [] })).toBe(false);
  });
});
