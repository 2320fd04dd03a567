// The drift check's period per model: within a tenth of the configured one, spread, and stable.
import { describe, expect, it } from 'vitest';
import { jitteredSeconds } from '../../src/core/reconcile-timing.js';

describe("a model's drift-check period", () => {
  const periods = Array.from({ length: 1000 }, (_, i) => jitteredSeconds(36_000, `ns/model-${i}`));

  it('is within a tenth of the configured period either way', () => {
    expect(Math.min(...periods)).toBeGreaterThanOrEqual(32_400);
    expect(Math.max(...periods)).toBeLessThanOrEqual(39_600);
  });

  it('spreads models started together across that window', () => {
    // Ten bins of 720 s: none empty and none with more than twice its share.
    const bins = new Array<number>(10).fill(0);
    for (const p of periods) bins[Math.min(9, Math.floor((p - 32_400) / 720))]!++;
    expect(Math.min(...bins)).toBeGreaterThan(0);
    expect(Math.max(...bins)).toBeLessThanOrEqual(200);
  });

  it('is the same for every run of one model, so a replay and a continued run agree', () => {
    expect(jitteredSeconds(600, 'default/image-classifier-v1')).toBe(
      jitteredSeconds(600, 'default/image-classifier-v1'),
    );
    expect(jitteredSeconds(600, 'default/a')).not.toBe(jitteredSeconds(600, 'default/b'));
  });
});
