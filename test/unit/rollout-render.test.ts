import { describe, expect, it } from 'vitest';
import { renderRollout } from '../../src/cli/rollouts.js';

describe('mmctl rollout status', () => {
  it('says where the rollout stands, what runs where, and its story', () => {
    expect(
      renderRollout({
        model: 'default/image-classifier-v1',
        workflowId: 'machinemodel/default/image-classifier-v1/rollout/1a2b3c4d',
        view: {
          revision: { image: 'my-registry/image-classifier:v1.3.0', modelPath: '/app/models/v3' },
          stable: { image: 'my-registry/image-classifier:v1.2.0', modelPath: '/app/models/v2' },
          phase: 'Progressing',
          step: 1,
          steps: 2,
          weight: 10,
          pauseSecondsLeft: 252,
          verdicts: ['step 1 (10%): canary 1 of 1 ready; the gateway does not report its error rate'],
        },
      }),
    ).toBe(
      [
        'default/image-classifier-v1: rollout Progressing, step 1 of 2, canary 10% (pause: 4m 12s left)',
        '  stable    my-registry/image-classifier:v1.2.0 (/app/models/v2)',
        '  canary    my-registry/image-classifier:v1.3.0 (/app/models/v3)',
        '  workflow  machinemodel/default/image-classifier-v1/rollout/1a2b3c4d',
        '  story:',
        '    step 1 (10%): canary 1 of 1 ready; the gateway does not report its error rate',
      ].join('\n'),
    );
  });

  it("counts a running pause's time left by the reader's clock, not as of the rollout's last step", () => {
    const now = Date.parse('2026-11-25T10:00:00Z');
    const view = {
      revision: { image: 'm:2', modelPath: '/v2' },
      stable: { image: 'm:1', modelPath: '/v1' },
      phase: 'Progressing' as const,
      step: 1,
      steps: 1,
      weight: 25,
      pauseSecondsLeft: 1800,
      pauseEndsAt: '2026-11-25T10:04:12Z',
      verdicts: [],
    };
    const first = (r: string) => r.split('\n')[0];
    expect(first(renderRollout({ model: 'ns/m', workflowId: 'w', view }, now))).toBe(
      'ns/m: rollout Progressing, step 1 of 1, canary 25% (pause: 4m 12s left)',
    );
    expect(first(renderRollout({ model: 'ns/m', workflowId: 'w', view }, now + 300_000))).toContain('(pause: 0s left)');
    // Paused: no end while it is frozen; the time left the rollout kept.
    const paused = { ...view, phase: 'Paused' as const, pauseEndsAt: undefined, pauseSecondsLeft: 90 };
    expect(first(renderRollout({ model: 'ns/m', workflowId: 'w', view: paused }, now))).toContain(
      '(pause: 1m 30s left)',
    );
  });
});
