import { noopMetricMeter } from '@temporalio/common';
import { DefaultLogger } from '@temporalio/worker';
import { compileWorkerOptions } from '@temporalio/worker/lib/worker-options.js';
import { describe, expect, it } from 'vitest';
import { imageNodeOptions } from '../../bench/harness/image-node-options.js';
import {
  cachedWorkflowsFor,
  heapLimitMiB,
  recommendedNodeOptions,
  sdkDefaultCachedWorkflows,
  unboundedHeapWarning,
} from '../../src/process/heap-bound.js';

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

describe('cachedWorkflowsFor', () => {
  it("is the SDK's own default for the heap limit", () => {
    // The SDK's compiled options at this process's heap limit: the formula must not drift from it.
    const compiled = compileWorkerOptions(
      { taskQueue: 'cache-size', workflowsPath: '/nonexistent/workflows.js' },
      new DefaultLogger('ERROR'),
      noopMetricMeter,
    );
    expect(sdkDefaultCachedWorkflows(heapLimitMiB())).toBe(compiled.maxCachedWorkflows);
    // The image's heaps: 384 MiB old space and 3 x 2 MiB of young generation.
    expect(sdkDefaultCachedWorkflows(390)).toBe(111);
    expect(sdkDefaultCachedWorkflows(150)).toBe(10);
  });

  it('holds every model the start gate lets start and as many settling, with room for the rest', () => {
    // At the image's heap the SDK's 111 would evict a starting model before its Deployment is ready.
    expect(cachedWorkflowsFor(390, 64)).toBe(144);
    expect(cachedWorkflowsFor(390, 16)).toBe(111);
    expect(cachedWorkflowsFor(4288, 64)).toBe(2395);
  });

  it("keeps the SDK's default when the start gate has no bound", () => {
    expect(cachedWorkflowsFor(390, 0)).toBe(111);
  });
});
