import { describe, expect, it } from 'vitest';
import { appliesWithRead, lifecycleOf } from '../../src/core/lifecycle.js';

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
