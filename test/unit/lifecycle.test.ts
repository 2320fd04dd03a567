import { describe, expect, it } from 'vitest';
import { appliesWithRead, lifecycleOf, reportsWithApply } from '../../src/core/lifecycle.js';
import { progressOnSight } from '../../src/core/progress.js';

describe('the finalizer state table', () => {
  it.each([
    ['absent', null, true, { step: 'gone' }],
    ['live, not ours yet', { deleting: false, hasFinalizer: false }, true, { step: 'apply', addFinalizer: true }],
    [
      'live, not ours, nothing outside its namespace to clean',
      { deleting: false, hasFinalizer: false },
      false,
      { step: 'apply', addFinalizer: false },
    ],
    ['live, ours', { deleting: false, hasFinalizer: true }, true, { step: 'apply', addFinalizer: false }],
    [
      'live, ours, no longer needed',
      { deleting: false, hasFinalizer: true },
      false,
      { step: 'apply', addFinalizer: false },
    ],
    [
      'deleting with our finalizer',
      { deleting: true, hasFinalizer: true },
      true,
      { step: 'cleanup', removeFinalizer: true },
    ],
    [
      'deleting with our finalizer, no gateway now',
      { deleting: true, hasFinalizer: true },
      false,
      { step: 'cleanup', removeFinalizer: true },
    ],
    ['deleting without it', { deleting: true, hasFinalizer: false }, true, { step: 'cleanup', removeFinalizer: false }],
  ] as const)('%s', (_, model, needsFinalizer, expected) => {
    expect(lifecycleOf(model, needsFinalizer)).toEqual(expected);
  });
});

describe('whether the read step applies the children too', () => {
  const live = {
    deleting: false,
    hasFinalizer: true,
    specErrors: [],
    ref: { uid: 'u1' },
    gatewayConfigured: true,
  };
  it.each([
    ['the followed object, ours', live, 'u1', true],
    ['an object met first', live, undefined, true],
    ['no gateway, no finalizer needed', { ...live, hasFinalizer: false, gatewayConfigured: false }, 'u1', true],
    ['absent', null, 'u1', false],
    ['a finalizer to add first', { ...live, hasFinalizer: false }, 'u1', false],
    ['an invalid spec', { ...live, specErrors: ['spec.image: required'] }, 'u1', false],
    ['deleting', { ...live, deleting: true }, 'u1', false],
    ['a new object of the followed name', live, 'u0', false],
  ] as const)('%s', (_, model, followedUid, expected) => {
    expect(appliesWithRead(model && { ...model, specErrors: [...model.specErrors] }, followedUid)).toBe(expected);
  });
});

describe('whether the read step writes the status too', () => {
  const plain = { gatewayConfigured: false, spec: {} };
  const published = { gatewayConfigured: true, spec: {} };
  const ready = { kind: 'ready' };
  const progressing = { kind: 'progressing' };
  it.each([
    ['no gateway, ready', plain, {}, ready, true],
    ['no gateway, progressing', plain, {}, progressing, true],
    ['a gateway, not ready: no route to publish yet', published, {}, progressing, true],
    ['a gateway, ready: the route comes between', published, {}, ready, false],
    ['results recorded before the field: a gateway', { spec: {} }, {}, ready, false],
    ['a rollout in the spec', { ...plain, spec: { rollout: { strategy: 'Canary' } } }, {}, ready, false],
    ['a canary left to remove', plain, { canary: true }, ready, false],
  ] as const)('%s', (_, model, applied, verdict, expected) => {
    expect(reportsWithApply(model, applied, verdict)).toBe(expected);
  });
});

describe('the progress a round starts from', () => {
  const followed = { uid: 'u1', lastGeneration: 2, progressStartedAt: 1000, notReadyChecks: 3 };
  it.each([
    [
      'the followed object and generation: its own',
      { uid: 'u1', generation: 2 },
      { progressStartedAt: 1000, notReadyChecks: 3 },
    ],
    ['a new generation: from nothing', { uid: 'u1', generation: 3 }, { notReadyChecks: 0 }],
    ['a new object of the name: from nothing', { uid: 'u2', generation: 2 }, { notReadyChecks: 0 }],
  ] as const)('%s', (_, seen, expected) => {
    expect(progressOnSight(followed, seen)).toEqual(expected);
  });

  it('starts from nothing at first sight', () => {
    expect(progressOnSight({ notReadyChecks: 0 }, { uid: 'u1', generation: 1 })).toEqual({ notReadyChecks: 0 });
  });
});
