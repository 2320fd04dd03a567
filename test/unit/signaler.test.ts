import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { SignalRequest } from '../../src/informer/event-filter.js';
import { merge, Signaler } from '../../src/informer/signaler.js';

const req = (name: string, signal: SignalRequest['signal'] = 'reconcile', rv = '1'): SignalRequest => ({
  namespace: 'ns',
  name,
  signal,
  hint: { source: 'MachineModel', event: 'updated', resourceVersion: rv },
});
const quiet = pino({ level: 'silent' });

describe('Signaler', () => {
  it('coalesces requests for one model while a delivery is in flight', async () => {
    const sent: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const s = new Signaler(
      async (r) => {
        sent.push(`${r.name}@${r.hint.resourceVersion}`);
        if (sent.length === 1) await gate;
      },
      quiet,
      { concurrency: 1, backoffMs: { initial: 1, max: 1 } },
    );
    s.enqueue(req('a', 'reconcile', '1'));
    for (let i = 2; i <= 50; i++) s.enqueue(req('a', 'reconcile', String(i)));
    release();
    await s.idle();
    // The 49 coalesced events are no one version of the object: the second hint names none.
    expect(sent).toEqual(['a@1', 'a@undefined']);
  });

  it('sends nothing while held, then what came meanwhile, coalesced (a restart waits for its queue to be taken)', async () => {
    const sent: string[] = [];
    let ready!: () => void;
    const s = new Signaler(async (r) => void sent.push(r.name), quiet, {
      concurrency: 2,
      backoffMs: { initial: 1, max: 1 },
    });
    s.holdUntil(new Promise<void>((r) => (ready = r)));
    s.enqueue(req('a', 'reconcile', '1'));
    s.enqueue(req('a', 'reconcile', '2'));
    s.enqueue(req('b'));
    await sleep(20);
    expect(sent).toEqual([]);
    ready();
    await sleep(0);
    await s.idle();
    expect(sent.sort()).toEqual(['a', 'b']);
  });

  it('stops holding after atMostMs, whatever it waited for', async () => {
    const sent: string[] = [];
    const s = new Signaler(async (r) => void sent.push(r.name), quiet, {
      concurrency: 1,
      backoffMs: { initial: 1, max: 1 },
    });
    s.holdUntil(new Promise<void>(() => undefined), 30);
    s.enqueue(req('a'));
    await sleep(10);
    expect(sent).toEqual([]);
    await sleep(40);
    await s.idle();
    expect(sent).toEqual(['a']);
  });

  it('does not let one slow delivery hold up the others, and never sends for one model twice at once', async () => {
    const sent: string[] = [];
    let inFlightA = 0;
    let maxInFlightA = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const s = new Signaler(
      async (r) => {
        sent.push(r.name);
        if (r.name !== 'a') return;
        maxInFlightA = Math.max(maxInFlightA, ++inFlightA);
        if (sent.length === 1) await gate;
        inFlightA--;
      },
      quiet,
      { concurrency: 2, backoffMs: { initial: 1, max: 1 } },
    );
    s.enqueue(req('a'));
    for (const n of ['b', 'c', 'd', 'a', 'e']) s.enqueue(req(n));
    await sleep(20);
    // 'a' is still in flight: the other sender delivered the rest, but not 'a' again.
    expect(sent).toEqual(['a', 'b', 'c', 'd', 'e']);
    // Undelivered: 'a' in flight, and its newer request waiting (one model, counted once).
    expect(s.pendingCount).toBe(1);
    release();
    await s.idle();
    expect(sent).toEqual(['a', 'b', 'c', 'd', 'e', 'a']);
    expect(maxInFlightA).toBe(1);
    expect(s.pendingCount).toBe(0);
  });

  it('keeps requests while Temporal is unreachable and delivers them when it returns', async () => {
    let up = false;
    const delivered = new Set<string>();
    const s = new Signaler(
      async (r) => {
        if (!up) throw new Error('connection refused');
        delivered.add(r.name);
      },
      quiet,
      { concurrency: 4, backoffMs: { initial: 5, max: 20 } },
    );
    for (const n of ['a', 'b', 'c', 'd', 'e', 'f']) s.enqueue(req(n));
    await sleep(60);
    expect(delivered.size).toBe(0);
    up = true;
    await s.idle();
    expect([...delivered].sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(s.failures).toBeGreaterThan(0);
  });

  it('lets a reconcile win over a deleted for the same name (the object may have been recreated)', () => {
    expect(merge(req('a', 'reconcile'), req('a', 'deleted')).signal).toBe('reconcile');
    expect(merge(req('a', 'deleted'), req('a', 'reconcile')).signal).toBe('reconcile');
    expect(merge(undefined, req('a', 'deleted')).signal).toBe('deleted');
  });

  it('names every version a coalesced hint stands for, so a workflow takes it for its echo only when all are', () => {
    expect(merge(undefined, req('a', 'reconcile', '7')).hint.resourceVersion).toBe('7');
    const merged = merge(req('a', 'reconcile', '7'), req('a', 'reconcile', '8'));
    expect(merged.hint).toEqual({
      source: 'MachineModel',
      event: 'updated',
      versions: ['MachineModel/7', 'MachineModel/8'],
    });
    const three = merge(merged, req('a', 'reconcile', '9'));
    expect(three.hint.versions).toEqual(['MachineModel/7', 'MachineModel/8', 'MachineModel/9']);
    // One event without a version (a re-list): the merged hint names none, and is never an echo.
    const relisted: SignalRequest = { ...req('a'), hint: { source: 'MachineModel', event: 'relisted' } };
    expect(merge(merged, relisted).hint).toEqual({ source: 'MachineModel', event: 'relisted' });
  });
});

describe('Signaler spacing', () => {
  it('delivers to one model at most once per minIntervalMs, coalescing what comes meanwhile, others unhindered', async () => {
    const sent: { name: string; at: number }[] = [];
    const s = new Signaler(
      async (r) => {
        sent.push({ name: r.name, at: Date.now() });
      },
      quiet,
      { concurrency: 2, backoffMs: { initial: 1, max: 1 }, minIntervalMs: 300 },
    );
    const start = Date.now();
    s.enqueue(req('a', 'reconcile', '1'));
    await sleep(20);
    for (let i = 2; i <= 10; i++) s.enqueue(req('a', 'reconcile', String(i)));
    s.enqueue(req('b'));
    await sleep(20);
    // 'b' went at once; 'a' waits for its interval.
    expect(sent.map((x) => x.name)).toEqual(['a', 'b']);
    await sleep(700);
    expect(sent.map((x) => x.name)).toEqual(['a', 'b', 'a']);
    expect(sent[2]!.at - start).toBeGreaterThanOrEqual(290);
    expect(s.pendingCount).toBe(0);
    await s.stop();
  });
});
