import { describe, expect, it } from 'vitest';
import { lifecycleOf } from '../../src/core/lifecycle.js';

describe('the finalizer state table', () => {
  it.each([
    ['absent', null, { step: 'gone' }],
    ['live, not ours yet', { deleting: false, hasFinalizer: false }, { step: 'apply', addFinalizer: true }],
    ['live, ours', { deleting: false, hasFinalizer: true }, { step: 'apply', addFinalizer: false }],
    ['deleting with our finalizer', { deleting: true, hasFinalizer: true }, { step: 'cleanup', removeFinalizer: true }],
    ['deleting without it', { deleting: true, hasFinalizer: false }, { step: 'cleanup', removeFinalizer: false }],
  ] as const)('%s', (_, model, expected) => {
    expect(lifecycleOf(model)).toEqual(expected);
  });
});
