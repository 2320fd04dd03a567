import { describe, expect, it } from 'vitest';
import { imageNodeOptions } from '../../bench/harness/image-node-options.js';
import { recommendedNodeOptions, unboundedHeapWarning } from '../../src/process/heap-bound.js';

describe('unboundedHeapWarning', () => {
  it("stays quiet at the image's bound and a little above it", () => {
    expect(unboundedHeapWarning(432)).toBeUndefined();
    expect(unboundedHeapWarning(768)).toBeUndefined();
  });

  it("names the limit and the image's NODE_OPTIONS when V8 sized the heap from the machine", () => {
    const warning = unboundedHeapWarning(4144.5);
    expect(warning).toContain('4145 MiB');
    expect(warning).toContain('NODE_OPTIONS="--max-semi-space-size=2 --max-old-space-size=384"');
  });

  it('recommends what the image sets', () => {
    expect(imageNodeOptions()).toBe(recommendedNodeOptions);
  });
});
