import { describe, expect, it } from 'vitest';
import { workflowCacheOf } from '../../bench/harness/run.js';

describe("the benchmark's reading of the SDK's workflow cache metrics", () => {
  it('sums each counter over its series, with or without the _total suffix', () => {
    const body = [
      '# HELP temporal_sticky_cache_hit Count of times the workflow cache was used for a new workflow task',
      '# TYPE temporal_sticky_cache_hit counter',
      'temporal_sticky_cache_hit_total{namespace="default",task_queue="q"} 120',
      'temporal_sticky_cache_hit_total{namespace="default",task_queue="q2"} 3',
      'temporal_sticky_cache_miss{namespace="default"} 40',
      'temporal_sticky_cache_size{namespace="default"} 17',
      'temporal_sticky_cache_total_forced_eviction_total{namespace="default"} 9',
      'temporal_sticky_cache_hit_ratio 0.5',
    ].join('\n');
    expect(workflowCacheOf(body)).toEqual({ hits: 123, misses: 40, forcedEvictions: 9, size: 17 });
  });

  it('reads zeros from a body without them', () => {
    expect(workflowCacheOf('temporal_workflow_completed 1\n')).toEqual({
      hits: 0,
      misses: 0,
      forcedEvictions: 0,
      size: 0,
    });
  });
});
