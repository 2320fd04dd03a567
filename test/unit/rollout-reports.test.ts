import { describe, expect, it } from 'vitest';
import { judgeReport, type RecordedRollout } from '../../src/core/rollout-reports.js';

const v2 = { image: 'm:2', modelPath: '/models/m' };
const recorded: RecordedRollout = {
  workflowId: 'machinemodel/a/m/rollout/r2',
  runId: 'run-1',
  revision: v2,
  running: true,
};
const from = { workflowId: recorded.workflowId, firstRunId: 'run-1' };
const report = (extra: object = {}) => ({ from, view: { revision: v2 }, ...extra });

describe('judgeReport: which rollout reports a model takes', () => {
  it("takes its running rollout's own run's report", () => {
    expect(judgeReport(recorded, report())).toEqual({ take: true });
  });

  it.each([
    ['no rollout recorded', undefined, report()],
    ['the rollout ended', { ...recorded, running: false }, report()],
    ['another revision', recorded, report({ view: { revision: { ...v2, image: 'm:3' } } })],
    ['another rollout', recorded, report({ from: { ...from, workflowId: 'machinemodel/a/m/rollout/r3' } })],
    ['another run', recorded, report({ from: { ...from, firstRunId: 'run-2' } })],
    ['no run named, to a rollout whose run is known', recorded, { view: { revision: v2 } }],
  ])('refuses one when %s', (_, r, rep) => {
    expect(judgeReport(r, rep)).toMatchObject({ take: false });
  });

  it('binds a rollout whose run it does not know yet (start in flight, followed after a reset) to the first report that names one', () => {
    const unknown = { ...recorded, runId: null };
    expect(judgeReport(unknown, report())).toEqual({ take: true, bindRunId: 'run-1' });
    // Unnamed, it is refused: only 0.2.0's records, which have no runId at all, take unnamed reports.
    expect(judgeReport(unknown, { view: { revision: v2 } })).toMatchObject({ take: false });
  });

  it("takes a 0.2.0 rollout's unnamed report while the model knows no run of it", () => {
    expect(judgeReport({ ...recorded, runId: undefined }, { view: { revision: v2 } })).toEqual({ take: true });
  });
});
