import { describe, expect, it } from 'vitest';
import type { SignalRequest } from '../../src/informer/event-filter.js';
import { StartGate } from '../../src/informer/start-gate.js';
import { awaitsFirstRound, settled, startBound, type ArrivalBurst } from '../../src/core/first-round.js';

const req = (name: string, signal: SignalRequest['signal'] = 'reconcile', rv = '1'): SignalRequest => ({
  namespace: 'ns',
  name,
  signal,
  hint: { source: 'MachineModel', event: 'added', resourceVersion: rv },
});
const fresh = { metadata: { generation: 1 } };
const reconciling = (status: 'True' | 'False', observedGeneration = 1) => ({
  metadata: { generation: 1 },
  status: { observedGeneration, conditions: [{ type: 'Reconciling', status }] },
});

/** The model as the watch has it: with its name and namespace. */
const named = (name: string, model: { metadata?: object; status?: object }) => ({
  ...model,
  metadata: { ...model.metadata, name, namespace: 'ns' },
});

/** A gate with a clock the test moves, and what it let through. */
function gate(maxStarting: number, holdLimitMs = 60_000, burst?: ArrivalBurst) {
  let now = 0;
  const passed: string[] = [];
  const g = new StartGate(
    (r) => passed.push(`${r.name}:${r.signal}`),
    { maxStarting, holdLimitMs, ...(burst ? { burst } : {}) },
    () => now,
  );
  /** A MachineModel watch event and the request the filter makes of it, as the informer hands them over. */
  const seen = (
    name: string,
    model: { metadata?: object; status?: object },
    type: 'added' | 'updated' | 'deleted' = 'added',
    request = true,
  ) => {
    g.observe(type, named(name, model));
    if (request) g.offer(req(name, type === 'deleted' ? 'deleted' : 'reconcile'));
  };
  return { g, passed, seen, advance: (ms: number) => (now += ms) };
}

describe('first-round decisions', () => {
  it('takes a model without observedGeneration for new, unless it is being deleted', () => {
    expect(awaitsFirstRound(fresh)).toBe(true);
    expect(awaitsFirstRound({ metadata: { generation: 1 }, status: null })).toBe(true);
    expect(awaitsFirstRound({ metadata: { generation: 1, deletionTimestamp: 'x' } })).toBe(false);
    expect(awaitsFirstRound(reconciling('True'))).toBe(false);
  });

  it('takes a model for settled once a round saw its spec and it is not reconciling', () => {
    expect(settled(fresh)).toBe(false);
    expect(settled(reconciling('True'))).toBe(false);
    expect(settled(reconciling('False'))).toBe(true);
    expect(settled(reconciling('False', 0))).toBe(false);
    expect(settled({ metadata: { generation: 1 }, status: { observedGeneration: 1 } })).toBe(true);
  });
});

describe('the bound while a bulk apply arrives', () => {
  const burst: ArrivalBurst = { arrivals: 3, windowMs: 1_000, maxStarting: 2 };

  it('stays the full bound for a few new models, or arrivals that left the window', () => {
    expect(startBound(10, burst, [0, 10, 20], 30)).toEqual({ bound: 10 });
    expect(startBound(10, burst, [0, 10, 20, 30, 40], 1_500)).toEqual({ bound: 10 });
  });

  it("is the burst's while more arrived within the window, until enough of them leave it", () => {
    // Five within the window: once the second (t=10) leaves it, three remain.
    expect(startBound(10, burst, [0, 10, 20, 30, 40], 50)).toEqual({ bound: 2, until: 1_010 });
    expect(startBound(10, burst, [0, 10, 20, 30, 40], 1_005)).toEqual({ bound: 2, until: 1_010 });
  });

  it('never raises a smaller full bound', () => {
    expect(startBound(1, burst, [0, 10, 20, 30, 40], 50)).toEqual({ bound: 1 });
  });
});

describe('StartGate', () => {
  it('starts a few at a time while a bulk apply arrives, and up to the full bound once it stops', async () => {
    const { g, passed, seen, advance } = gate(10, 60_000, { arrivals: 3, windowMs: 1_000, maxStarting: 2 });
    for (const name of ['a', 'b', 'c']) seen(name, fresh);
    expect(passed).toHaveLength(3);
    for (const name of ['d', 'e', 'f', 'g', 'h']) seen(name, fresh);
    expect(passed).toHaveLength(3);
    seen('a', reconciling('False'), 'updated', false);
    seen('b', reconciling('False'), 'updated', false);
    // Two places freed, but with 8 arrivals in the window only 2 may be starting: c and one more.
    expect(passed).toEqual(['a:reconcile', 'b:reconcile', 'c:reconcile', 'd:reconcile']);
    advance(1_000);
    seen('i', fresh, 'added', false);
    // The burst is over (one arrival in the window): the rest go, up to the full bound.
    g.offer(req('i'));
    expect(passed).toHaveLength(9);
    g.stop();
  });

  it('wakes itself when the burst ends', async () => {
    const g = new StartGate(() => undefined, {
      maxStarting: 10,
      holdLimitMs: 60_000,
      burst: { arrivals: 1, windowMs: 30, maxStarting: 1 },
    });
    for (const name of ['a', 'b', 'c']) {
      g.observe('added', named(name, fresh));
      g.offer(req(name));
    }
    expect(g.started).toBe(1);
    await new Promise((r) => setTimeout(r, 80));
    expect(g.started).toBe(3);
    g.stop();
  });

  it('lets through at most maxStarting new models, and the next as one settles', () => {
    const { passed, seen } = gate(2);
    for (const name of ['a', 'b', 'c', 'd']) seen(name, fresh);
    expect(passed).toEqual(['a:reconcile', 'b:reconcile']);
    seen('a', reconciling('True'), 'updated', false);
    expect(passed).toHaveLength(2);
    seen('a', reconciling('False'), 'updated', false);
    expect(passed).toEqual(['a:reconcile', 'b:reconcile', 'c:reconcile']);
  });

  it('coalesces what a waiting model is told, and passes it on once, in its turn', () => {
    const { g, passed, seen } = gate(1);
    seen('a', fresh);
    seen('b', fresh);
    g.offer(req('b', 'reconcile', '2'));
    g.offer(req('b', 'reconcile', '3'));
    expect(g.waitingCount).toBe(1);
    seen('a', reconciling('False'), 'updated', false);
    expect(passed).toEqual(['a:reconcile', 'b:reconcile']);
    expect(g.waitingCount).toBe(0);
  });

  it('passes on at once what concerns models that are not new', () => {
    const { passed, seen } = gate(1);
    seen('a', fresh);
    seen('b', fresh);
    seen('ready', reconciling('False'));
    seen('deleting', { metadata: { generation: 1, deletionTimestamp: 'x' } });
    expect(passed).toEqual(['a:reconcile', 'ready:reconcile', 'deleting:reconcile']);
  });

  it('frees a place at the hold limit for a model that never settles', () => {
    const { g, passed, seen, advance } = gate(1, 1_000);
    seen('crashing', fresh);
    seen('b', fresh);
    expect(passed).toEqual(['crashing:reconcile']);
    advance(1_000);
    seen('c', fresh);
    expect(passed).toEqual(['crashing:reconcile', 'b:reconcile']);
    expect(g.expired).toBe(1);
  });

  it('wakes itself at the hold limit when nothing else happens', async () => {
    const g = new StartGate(() => undefined, { maxStarting: 1, holdLimitMs: 20 });
    g.observe('added', named('a', fresh));
    g.offer(req('a'));
    g.observe('added', named('b', fresh));
    g.offer(req('b'));
    expect(g.started).toBe(1);
    await new Promise((r) => setTimeout(r, 60));
    expect(g.started).toBe(2);
    g.stop();
  });

  it('drops a waiting model deleted before its turn, passes its deletion on, and frees a started one', () => {
    const { g, passed, seen } = gate(1);
    seen('a', fresh);
    seen('b', fresh);
    seen('c', fresh);
    seen('b', fresh, 'deleted');
    expect(passed).toEqual(['a:reconcile', 'b:deleted']);
    seen('a', fresh, 'deleted');
    expect(passed).toEqual(['a:reconcile', 'b:deleted', 'c:reconcile', 'a:deleted']);
    expect(g.waitingCount).toBe(0);
  });

  it('passes on what a waiting model holds once another replica has started it', () => {
    const { passed, seen } = gate(1);
    seen('a', fresh);
    seen('b', fresh);
    seen('b', reconciling('True'), 'updated', false);
    expect(passed).toEqual(['a:reconcile', 'b:reconcile']);
  });

  it('with no bound, passes everything on at once', () => {
    const { g, passed, seen } = gate(0);
    for (const name of ['a', 'b', 'c']) seen(name, fresh);
    expect(passed).toHaveLength(3);
    expect(g.waitingCount).toBe(0);
  });
});
