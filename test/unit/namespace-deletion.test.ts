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

  // helper-35: the tenant released its models' finalizers one at a time, each within the settle time of
  // the last, and so kept its namespace counting for the lane's whole limit.
  it('does not count the settle time while a model still waits on a finalizer not ours', () => {
    expect(deletionUnderWay({ modelFinalizers: [[tenants]], sinceLastHeldMs: 0 })).toBe(false);
    expect(deletionUnderWay({ modelFinalizers: [[tenants], [tenants, finalizerName]], sinceLastHeldMs: 1 })).toBe(
      false,
    );
  });

  it('counts a namespace only while a model will go, or settling with none left, never while only others’ finalizers keep models (property)', () => {
    const finalizers = fc.array(fc.subarray([finalizerName, tenants, 'other.example.com/x']), { maxLength: 4 });
    fc.assert(
      fc.property(finalizers, fc.option(fc.nat({ max: 10 * settleMs })), (models, since) => {
        const willGo = models.some((f) => f.every((x) => x === finalizerName));
        const settling = models.length === 0 && since !== null && since < settleMs;
        expect(deletionUnderWay({ modelFinalizers: models, sinceLastHeldMs: since ?? undefined })).toBe(
          willGo || settling,
        );
      }),
    );
  });

  // The lane's script of a tenant releasing its models' finalizers one at a time (helper-35): at no
  // step does its namespace hold the others back.
  it('a tenant releasing kept models one at a time never counts', () => {
    for (let kept = 20; kept > 0; kept--) {
      const models = Array.from({ length: kept }, () => [tenants]);
      expect(deletionUnderWay({ modelFinalizers: models, sinceLastHeldMs: 14_000 })).toBe(false);
    }
  });
});
