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
