// Drains of the queues a layout leaves unpolled: one worker a queue however often it is asked, kept
// while anything runs there, stopped once nothing does; a failed start or a failed drain is tried
// again at the next look; nothing is left running after stop.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { QueueDrains, type DrainParts } from '../../src/sharding/queue-drains.js';

function harness() {
  const steps: string[] = [];
  const gate = { open: Promise.resolve() };
  const running = new Map<string, number>();
  const failStart = new Set<string>();
  const fail = new Map<string, (err: Error) => void>();
  const parts: DrainParts = {
    async startWorker(queue) {
      await gate.open;
      if (failStart.delete(queue)) throw new Error(`${queue}: no worker`);
      steps.push(`start ${queue}`);
      const run = new Promise<void>((_, reject) => fail.set(queue, reject));
      run.catch(() => undefined);
      return { run, shutdown: async () => void steps.push(`stop ${queue}`) };
    },
    async running(queue) {
      const n = running.get(queue);
      if (n === undefined) throw new Error('Temporal away');
      return n;
    },
  };
  const drains = new QueueDrains(parts, pino({ level: 'silent' }), 60_000);
  let release!: () => void;
  const hold = () => {
    gate.open = new Promise((resolve) => (release = resolve));
  };
  return { steps, running, failStart, fail, drains, hold, release: () => release() };
}

describe('queue drains', () => {
  it('starts one worker a queue, however often the queue is named', async () => {
    const h = harness();
    await h.drains.drain(['q/shard-5', 'q/shard-4']);
    await h.drains.drain(['q/shard-5']);
    expect(h.steps).toEqual(['start q/shard-5', 'start q/shard-4']);
    expect(h.drains.queues).toEqual(['q/shard-4', 'q/shard-5']);
    await h.drains.stop();
  });

  it('keeps a drain while anything runs on its queue or Temporal cannot say, and stops it once two checks in a row find nothing', async () => {
    const h = harness();
    await h.drains.drain(['q/shard-5', 'q/shard-4']);
    h.running.set('q/shard-5', 2);
    await h.drains.check();
    expect(h.drains.queues).toEqual(['q/shard-4', 'q/shard-5']);
    h.running.set('q/shard-4', 0);
    await h.drains.check();
    // Visibility may lag a run that just continued as new there: one empty count is not enough.
    expect(h.drains.queues).toEqual(['q/shard-4', 'q/shard-5']);
    await h.drains.check();
    expect(h.drains.queues).toEqual(['q/shard-5']);
    h.running.set('q/shard-5', 0);
    await h.drains.check();
    h.running.set('q/shard-5', 1);
    await h.drains.check();
    h.running.set('q/shard-5', 0);
    await h.drains.check();
    expect(h.drains.queues).toEqual(['q/shard-5']);
    await h.drains.check();
    expect(h.drains.queues).toEqual([]);
    expect(h.steps).toEqual(['start q/shard-5', 'start q/shard-4', 'stop q/shard-4', 'stop q/shard-5']);
  });

  it('tries a queue again at the next look when its worker could not start or failed by itself', async () => {
    const h = harness();
    h.failStart.add('q/shard-5');
    await h.drains.drain(['q/shard-5']);
    expect(h.drains.queues).toEqual([]);
    await h.drains.drain(['q/shard-5']);
    expect(h.drains.queues).toEqual(['q/shard-5']);
    h.fail.get('q/shard-5')!(new Error('the worker failed'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(h.drains.queues).toEqual([]);
    await h.drains.drain(['q/shard-5']);
    expect(h.steps).toEqual(['start q/shard-5', 'start q/shard-5']);
    await h.drains.stop();
  });

  it('stops every drain when it stops, and starts none after', async () => {
    const h = harness();
    await h.drains.drain(['q/shard-5', 'q']);
    await h.drains.stop();
    await h.drains.drain(['q/shard-6']);
    expect(h.steps).toEqual(['start q/shard-5', 'start q', 'stop q/shard-5', 'stop q']);
    expect(h.drains.queues).toEqual([]);
  });

  // helper-36: two looks that ended together each started a worker on the queue, and the second
  // replaced the first, which then held the shared connection when the process stopped.
  it('starts one worker for a queue named by two looks at once', async () => {
    const h = harness();
    h.hold();
    const first = h.drains.drain(['q/shard-5']);
    const second = h.drains.drain(['q/shard-5']);
    h.release();
    await Promise.all([first, second]);
    expect(h.steps).toEqual(['start q/shard-5']);
    await h.drains.stop();
    expect(h.steps).toEqual(['start q/shard-5', 'stop q/shard-5']);
  });

  // helper-36: a worker whose start ended after the stop was shut down without anyone waiting for it.
  it('waits, when it stops, for a worker still starting, and shuts it down', async () => {
    const h = harness();
    h.hold();
    const drained = h.drains.drain(['q/shard-5']);
    let stopped = false;
    const stopping = h.drains.stop().then(() => (stopped = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    h.release();
    await Promise.all([drained, stopping]);
    expect(h.steps).toEqual(['start q/shard-5', 'stop q/shard-5']);
  });
});
