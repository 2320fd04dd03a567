// The order in which a replica changes its shards' work: lost workers stop before the informer takes
// the new scope, gained workers start after it; placements asked for meanwhile collapse into the latest;
// one that failed is applied again when asked again.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ShardPlacement, type PlacementParts } from '../../src/sharding/shard-placement.js';

function harness(failStart = new Set<number>()) {
  const steps: string[] = [];
  let release!: () => void;
  const gate = { held: false, open: Promise.resolve() };
  const parts: PlacementParts = {
    async startWorker(k) {
      await gate.open;
      if (failStart.has(k)) {
        failStart.delete(k);
        throw new Error(`shard ${k}: no worker`);
      }
      steps.push(`start ${k}`);
      return { run: new Promise<void>(() => undefined), shutdown: async () => void steps.push(`stop ${k}`) };
    },
    async reshard(owned) {
      steps.push(`scope ${[...owned].sort().join(',')}`);
    },
    placed: (held) => void steps.push(`placed ${held.join(',')}`),
    failed: (err) => void steps.push(`failed ${String(err)}`),
  };
  const hold = () => {
    gate.open = new Promise((resolve) => (release = resolve));
  };
  return { steps, parts, hold, release: () => release() };
}

describe('placing shards', () => {
  it("stops the lost shards' workers, then changes the scope, then starts the gained ones", async () => {
    const h = harness();
    const placement = new ShardPlacement(h.parts, pino({ level: 'silent' }));
    await placement.place([0, 1]);
    h.steps.length = 0;
    await placement.place([1, 2]);
    expect(h.steps).toEqual(['stop 0', 'scope 1,2', 'start 2', 'placed 1,2']);
  });

  it('applies only the latest of the placements asked for while one runs', async () => {
    const h = harness();
    const placement = new ShardPlacement(h.parts, pino({ level: 'silent' }));
    h.hold();
    const first = placement.place([0]);
    // Under way: waiting for its worker.
    await new Promise((resolve) => setImmediate(resolve));
    void placement.place([0, 1]);
    void placement.place([2]);
    const last = placement.place([3]);
    h.release();
    await Promise.all([first, last]);
    // The first was under way with [0] (its worker, lost meanwhile, stops as soon as it started); the
    // three asked meanwhile are one step, with [3].
    expect(h.steps).toEqual(['scope 0', 'start 0', 'stop 0', 'placed ', 'scope 3', 'start 3', 'placed 3']);
    expect(placement.held).toEqual([3]);
  });

  it("stops a lost shard's worker at once, while the step under way still starts another (seen: it waited)", async () => {
    const h = harness();
    const placement = new ShardPlacement(h.parts, pino({ level: 'silent' }));
    await placement.place([0]);
    h.steps.length = 0;
    h.hold();
    const starting = placement.place([0, 1]);
    await new Promise((resolve) => setImmediate(resolve));
    void placement.place([1]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(h.steps).toEqual(['scope 0,1', 'stop 0']);
    h.release();
    await starting;
  });

  it("narrows the informer's scope when shards are lost while their workers were still to start (seen: it kept all four, 8 models cached instead of 4)", async () => {
    const h = harness();
    const placement = new ShardPlacement(h.parts, pino({ level: 'silent' }));
    h.hold();
    const first = placement.place([0, 1, 2, 3]);
    await new Promise((resolve) => setImmediate(resolve));
    // Two of the four go (another replica joined) before their workers started.
    void placement.place([0, 1]);
    h.release();
    await first;
    await placement.place([0, 1]);
    expect(placement.held).toEqual([0, 1]);
    expect(h.steps.filter((s) => s.startsWith('scope')).at(-1)).toBe('scope 0,1');
  });

  it('places again a shard whose worker could not start, when asked again', async () => {
    const h = harness(new Set([1]));
    const placement = new ShardPlacement(h.parts, pino({ level: 'silent' }));
    await placement.place([1]);
    expect(placement.held).toEqual([]);
    await placement.place([1]);
    expect(placement.held).toEqual([1]);
  });
});
