// The operator's memory depends on how Node was started: the image bounds its heaps with NODE_OPTIONS,
// but `node dist/src/main.js` elsewhere gets V8's default, sized from the machine's memory. There the
// SDK's workflow cache grows with the heap limit and V8 collects lazily (762 MiB at 500 models on a
// 24 GiB machine, against about 300 MiB with the image's bound), so the operator says so at start.
import v8 from 'node:v8';

/** The heap limit the image sets (deploy/Dockerfile); anything well above it is unbounded for our purposes. */
export const imageHeapLimitMiB = 384;
export const recommendedNodeOptions = `--max-semi-space-size=2 --max-old-space-size=${imageHeapLimitMiB}`;

/** A warning when the heap limit is more than twice the image's; undefined when it is bounded. */
export function unboundedHeapWarning(heapLimitMiB: number): string | undefined {
  if (heapLimitMiB <= 2 * imageHeapLimitMiB) return undefined;
  return (
    `the heap limit is ${Math.round(heapLimitMiB)} MiB (V8's default for this machine): the workflow cache ` +
    'and the heaps grow with it; run with ' +
    `NODE_OPTIONS="${recommendedNodeOptions}" as the image does, or set --max-cached-workflows`
  );
}

export function heapLimitMiB(): number {
  return v8.getHeapStatistics().heap_size_limit / 2 ** 20;
}

/** The SDK's default workflow cache (1.24, reused V8 context): 600 workflows per GiB of heap above 200 MiB, at least 10. */
export function sdkDefaultCachedWorkflows(heapLimitMiB: number): number {
  return Math.max(Math.floor((Math.max(heapLimitMiB - 200, 0) * 600) / 1024), 10);
}

/** Tasks besides those of models starting and settling: drift checks, deletions, resyncs, the janitor. */
const cacheHeadroom = 16;

/**
 * The workflow cache for a start gate that lets `maxStarting` new models start at once. While a
 * model waits for its Deployment, the models ahead of it settle and as many start behind it, each
 * with a task: a cache smaller than twice the gate evicts it before it gets Ready, and its next
 * task replays its history (at N=1,000: 111 cached, 835 misses; 135 cached, none;
 * bench/journal.md, "The workflow cache and the start gate"). Never below the SDK's default.
 */
export function cachedWorkflowsFor(heapLimitMiB: number, maxStarting: number): number {
  const sdkDefault = sdkDefaultCachedWorkflows(heapLimitMiB);
  return maxStarting === 0 ? sdkDefault : Math.max(sdkDefault, 2 * maxStarting + cacheHeadroom);
}
