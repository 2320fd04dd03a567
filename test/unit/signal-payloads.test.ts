import { describe, expect, it } from 'vitest';
import { answerOf, hintOf, reportOf, uidOf } from '../../src/core/signal-payloads.js';

const view = { revision: { image: 'm:2', modelPath: '/models/m' }, phase: 'Progressing', step: 1, steps: 1, weight: 0 };

describe('signal payloads, as a handler reads them (anyone who may signal can send any JSON)', () => {
  it.each([undefined, null, 42, 'x', [], {}])('reads nothing usable from %j, and throws on none', (raw) => {
    expect(hintOf(raw)).toEqual({});
    expect(uidOf(raw)).toBeUndefined();
    expect(answerOf(raw)).toBeUndefined();
    expect(reportOf(raw)).toBeUndefined();
  });

  it('keeps the well-typed fields of a hint and drops the rest', () => {
    expect(
      hintOf({ source: 'Deployment', event: 'updated', uid: 7, generation: '2', versions: ['Deployment/1', 3], x: 1 }),
    ).toEqual({ source: 'Deployment', event: 'updated' });
    expect(
      hintOf({ source: 'MachineModel', event: 'added', uid: 'u', generation: 2, versions: ['MachineModel/9'] }),
    ).toEqual({ source: 'MachineModel', event: 'added', uid: 'u', generation: 2, versions: ['MachineModel/9'] });
  });

  it('takes an answer only with both numbers', () => {
    expect(answerOf({ seq: 3, weight: 20 })).toEqual({ seq: 3, weight: 20 });
    expect(answerOf({ seq: '3', weight: 20 })).toBeUndefined();
    expect(answerOf({ seq: 3 })).toBeUndefined();
  });

  it('takes a report whose revision, sender, ask and outcome are well typed', () => {
    const from = { workflowId: 'w', firstRunId: 'r' };
    const want = { step: 0, replicas: 1, weight: 20, seq: 1 };
    expect(reportOf({ from, view, want })).toEqual({ from, view, want });
    expect(reportOf({ view })).toEqual({ view });
    expect(reportOf({ view: { ...view, revision: { image: 'm:2' } } })).toBeUndefined();
    expect(reportOf({ view: {} })).toBeUndefined();
    expect(reportOf({ from: { workflowId: 'w' }, view })).toBeUndefined();
    expect(reportOf({ view, want: { ...want, seq: 'one' } })).toBeUndefined();
    expect(reportOf({ view, result: { outcome: 'Won' } })).toBeUndefined();
    expect(reportOf({ view, result: { outcome: 'Promoted', message: 'm', view } })).toBeDefined();
    // Rebuilt from its checked fields: what would reach the status as sent is dropped, or refuses it.
    expect(reportOf({ view: { ...view, message: {}, extra: 1 } })).toEqual({ view });
    expect(reportOf({ view: { ...view, step: 'one' } })).toBeUndefined();
  });
});
