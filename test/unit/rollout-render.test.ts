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
});
