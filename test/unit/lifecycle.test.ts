import { describe, expect, it } from 'vitest';
import { lifecycleOf } from '../../src/core/lifecycle.js';

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
