import type { Readiness } from '../../src/core/status.js';

/** A Deployment's rollout as observed: `ready` of `desired` replicas ready, all updated. */
export const readiness = (ready: number, desired = 2): Readiness => ({
  found: true,
  desiredReplicas: desired,
  replicas: desired,
  readyReplicas: ready,
  availableReplicas: ready,
  updatedReplicas: desired,
  observedLatest: true,
  available: { status: ready >= desired ? 'True' : 'False', reason: 'MinimumReplicasAvailable', message: '' },
});
