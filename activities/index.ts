import { applyChildrenActivity } from './apply-children.js';
import { canaryHealthActivity, canaryTrafficActivity, syncCanaryActivity } from './canary.js';
import type { ActivityDeps } from './deps.js';
import { recordEventActivity } from './events.js';
import { ensureFinalizerActivity, removeFinalizerActivity } from './finalizer.js';
import {
  inspectGatewayActivity,
  registerRouteActivity,
  removeCollidingRouteActivity,
  removeOrphanRouteActivity,
  unregisterRouteActivity,
} from './publication.js';
import { readAndApplyActivity } from './read-and-apply.js';
import { readModelActivity } from './read-model.js';
import { writeStatusActivity } from './write-status.js';

/** Every activity the workflows call (the model's, the gateway janitor's, a rollout's), bound to its dependencies. */
export function createActivities(deps: ActivityDeps) {
  const readModel = readModelActivity(deps);
  const applyChildren = applyChildrenActivity(deps);
  const writeStatus = writeStatusActivity(deps);
  return {
    readModel,
    readAndApply: readAndApplyActivity({ readModel, applyChildren, writeStatus }),
    ensureFinalizer: ensureFinalizerActivity(deps),
    applyChildren,
    writeStatus,
    removeFinalizer: removeFinalizerActivity(deps),
    recordModelEvent: recordEventActivity(deps),
    registerRoute: registerRouteActivity(deps),
    unregisterRoute: unregisterRouteActivity(deps),
    inspectGateway: inspectGatewayActivity(deps),
    removeOrphanRoute: removeOrphanRouteActivity(deps),
    removeCollidingRoute: removeCollidingRouteActivity(deps),
    syncCanary: syncCanaryActivity(deps),
    canaryHealth: canaryHealthActivity(deps),
    canaryTraffic: canaryTrafficActivity(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export type { ActivityDeps } from './deps.js';
export type { ModelSnapshot } from './read-model.js';
export type { ReadAndApplyInput, ReadAndApplyResult, ReportContext } from './read-and-apply.js';
export type { ApplyOptions, ApplyResult } from './apply-children.js';
export type { WriteStatusInput, WriteStatusResult } from './write-status.js';
export type { RegisterResult } from './publication.js';
