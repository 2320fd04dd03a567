import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { unschedulablePods } from '../../src/core/pod-scheduling.js';

const pod = (
  scheduled: { status: string; reason?: string; message?: string } | undefined,
  deleting = false,
): V1Pod => ({
  metadata: { name: 'p', ...(deleting ? { deletionTimestamp: new Date() } : {}) },
  status: { conditions: scheduled ? [{ type: 'PodScheduled', ...scheduled }] : [] },
});

describe('unschedulablePods', () => {
  it('counts pods the scheduler rejected and keeps its message', () => {
    const msg = '0/1 nodes are available: 1 Insufficient nvidia.com/gpu.';
    expect(
      unschedulablePods([
        pod({ status: 'False', reason: 'Unschedulable', message: msg }),
        pod({ status: 'True' }),
        pod({ status: 'False', reason: 'Unschedulable', message: msg }),
      ]),
    ).toEqual({
      pods: 2,
      message: msg,
    });
  });

  it('ignores scheduled, not yet considered, and terminating pods', () => {
    expect(
      unschedulablePods([
        pod({ status: 'True' }),
        pod(undefined),
        pod({ status: 'False', reason: 'Unschedulable', message: 'x' }, true),
      ]),
    ).toBeUndefined();
    expect(unschedulablePods([pod({ status: 'False', reason: 'SchedulingGated' })])).toBeUndefined();
  });
});
