// What the look at the running model workflows does with each (src/temporal/workflow-sweep.ts):
// tell it of its model's deletion, move it to its own queue, and say whether its queue needs a drain.
import { describe, expect, it } from 'vitest';
import { runningModelsQuery, sweepStep } from '../../src/temporal/workflow-sweep.js';

const base = 'mmo';
const polled = (q: string) => q === base || q === `${base}/shard-0` || q === `${base}/shard-1`;
const sharded = { queueFor: (ns: string) => (ns === 'a' ? `${base}/shard-0` : `${base}/shard-1`), polled };

describe('a look at the running model workflows', () => {
  it('moves a workflow of its own models that runs on another queue, and not one already there', () => {
    expect(sweepStep({ namespace: 'a', taskQueue: base }, 'present', sharded)).toEqual({
      deleted: false,
      moveTo: `${base}/shard-0`,
      stranded: false,
    });
    expect(sweepStep({ namespace: 'a', taskQueue: `${base}/shard-0` }, 'present', sharded).moveTo).toBeUndefined();
  });

  it('tells a workflow whose model is gone, and moves it nowhere', () => {
    expect(sweepStep({ namespace: 'b', taskQueue: `${base}/shard-1` }, 'absent', sharded)).toEqual({
      deleted: true,
      moveTo: undefined,
      stranded: false,
    });
  });

  it('leaves another replica’s models to it: no deletion, no move, no drain', () => {
    expect(sweepStep({ namespace: 'b', taskQueue: `${base}/shard-7` }, 'unknown', sharded)).toEqual({
      deleted: false,
      moveTo: undefined,
      stranded: false,
    });
  });

  it('drains an unpolled queue where its own models run, gone or not', () => {
    expect(sweepStep({ namespace: 'a', taskQueue: `${base}/shard-7` }, 'present', sharded)).toMatchObject({
      moveTo: `${base}/shard-0`,
      stranded: true,
    });
    expect(sweepStep({ namespace: 'a', taskQueue: `${base}/shard-7` }, 'absent', sharded)).toMatchObject({
      deleted: true,
      stranded: true,
    });
  });

  it('moves nothing without a worker in the process (no queueFor)', () => {
    expect(sweepStep({ namespace: 'a', taskQueue: base }, 'present', { polled }).moveTo).toBeUndefined();
  });

  it('asks Temporal for the running model workflows of its queues and namespaces, quoted', () => {
    expect(runningModelsQuery([base], [])).toBe(
      `WorkflowType = 'machineModelWorkflow' AND ExecutionStatus = 'Running' AND TaskQueue = 'mmo'`,
    );
    expect(runningModelsQuery([base, `${base}/shard-0`], ["it's"])).toContain(
      `TaskQueue IN ('mmo', 'mmo/shard-0') AND MachineModelNamespace IN ('it\\'s')`,
    );
  });
});
