import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { finalizerName } from '../../src/core/api.js';
import { deletionUnderWay, settleMs } from '../../src/core/namespace-deletion.js';

const tenants = 'tenant.example.com/keep';

describe('whether a namespace’s deletion is under way (the deletion lane waits for it)', () => {
  it('counts a namespace with a model that will go: no finalizer, or only ours', () => {
    expect(deletionUnderWay({ modelFinalizers: [[]], sinceLastHeldMs: undefined })).toBe(true);
    expect(deletionUnderWay({ modelFinalizers: [[finalizerName]], sinceLastHeldMs: undefined })).toBe(true);
    expect(deletionUnderWay({ modelFinalizers: [[tenants], []], sinceLastHeldMs: undefined })).toBe(true);
  });

  it('counts one whose last model went a moment ago, until the settle time passes', () => {
    expect(deletionUnderWay({ modelFinalizers: [], sinceLastHeldMs: 0 })).toBe(true);
    expect(deletionUnderWay({ modelFinalizers: 'unknown', sinceLastHeldMs: settleMs - 1 })).toBe(true);
    expect(deletionUnderWay({ modelFinalizers: [], sinceLastHeldMs: settleMs })).toBe(false);
  });

  it('does not count one that holds no model and held none (stuck on another controller’s finalizer)', () => {
    expect(deletionUnderWay({ modelFinalizers: [], sinceLastHeldMs: undefined })).toBe(false);
    expect(deletionUnderWay({ modelFinalizers: 'unknown', sinceLastHeldMs: undefined })).toBe(false);
  });

  // helper-34's finding: a tenant kept its namespace terminating with a model of its own finalizer, and
  // every other namespace's deletions on that replica waited the lane's full hold limit, at each deletion.
  it('does not count a tenant’s model kept by a finalizer not ours, even beside ours, once its namespace settled', () => {
    expect(deletionUnderWay({ modelFinalizers: [[tenants]], sinceLastHeldMs: undefined })).toBe(false);
    expect(deletionUnderWay({ modelFinalizers: [[finalizerName, tenants]], sinceLastHeldMs: settleMs })).toBe(false);
  });

  it('counts any namespace for no longer than settleMs after its last held deletion, unless a model will still go (property)', () => {
    const finalizers = fc.array(fc.subarray([finalizerName, tenants, 'other.example.com/x']), { maxLength: 4 });
    fc.assert(
      fc.property(finalizers, fc.nat({ max: 10 * settleMs }), (models, since) => {
        const willGo = models.some((f) => f.every((x) => x === finalizerName));
        expect(deletionUnderWay({ modelFinalizers: models, sinceLastHeldMs: since })).toBe(willGo || since < settleMs);
      }),
    );
  });
});
