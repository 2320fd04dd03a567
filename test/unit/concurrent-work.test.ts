// The handover benchmark's check that no model was worked on by two replicas at once
// (bench/harness/concurrent-work.ts), on histories written by hand.
import { msToTs } from '@temporalio/common/lib/time.js';
import { describe, expect, it } from 'vitest';
import { concurrentWork, workIntervals, workers } from '../../bench/harness/concurrent-work.js';

const at = (s: number) => msToTs(s * 1000);
/** An event of one of the kinds the check reads, at second `s`, for the task scheduled as `id`. */
const event = (kind: string, s: number, id: number, identity?: string) => ({
  eventTime: at(s),
  [`${kind}EventAttributes`]: { scheduledEventId: id, ...(identity ? { identity } : {}) },
});
const taskStarted = (s: number, id: number, identity: string) => event('workflowTaskStarted', s, id, identity);
const taskCompleted = (s: number, id: number) => event('workflowTaskCompleted', s, id);
const taskTimedOut = (s: number, id: number) => event('workflowTaskTimedOut', s, id);
const activityStarted = (s: number, id: number, identity: string) => event('activityTaskStarted', s, id, identity);
const activityCompleted = (s: number, id: number) => event('activityTaskCompleted', s, id);

describe('work on one history by two workers at once', () => {
  it('finds none when the next worker starts after the dead one timed out', () => {
    const intervals = workIntervals([
      taskStarted(1, 1, 'a'),
      taskCompleted(2, 1),
      taskStarted(3, 5, 'a'),
      taskTimedOut(13, 5),
      taskStarted(14, 7, 'b'),
      taskCompleted(15, 7),
    ]);
    expect(workers(intervals)).toEqual(new Set(['a', 'b']));
    expect(concurrentWork(intervals)).toEqual([]);
  });

  it("finds an activity of one worker running through another's workflow task", () => {
    const intervals = workIntervals([
      activityStarted(1, 3, 'a'),
      taskStarted(2, 5, 'b'),
      taskCompleted(3, 5),
      activityCompleted(4, 3),
    ]);
    expect(concurrentWork(intervals)).toHaveLength(1);
  });

  it('counts work still open as running until the end given', () => {
    const intervals = workIntervals([activityStarted(1, 3, 'a'), taskStarted(9, 5, 'b')], 10_000);
    expect(concurrentWork(intervals)).toHaveLength(1);
    expect(concurrentWork(workIntervals([activityStarted(1, 3, 'a'), taskStarted(9, 5, 'a')], 10_000))).toEqual([]);
  });
});
