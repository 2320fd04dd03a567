// Signals, query, update and the input/state types of the MachineModel workflow: the contract between
// the workflow, the informer and mmctl. Workflow-safe.
import { defineQuery, defineSignal, defineUpdate, type Sinks } from '@temporalio/workflow';
import type { Condition, Phase } from '../src/core/api.js';
import type { WorkflowConfig } from '../src/core/reconcile-timing.js';
import type { RoundMetricsSink } from '../src/core/round-result.js';
import type { RolloutState } from './rollout-definitions.js';

export const workflowType = 'machineModelWorkflow';

/** Why the informer says "look again"; never the spec itself (the workflow always reads the current object). */
export interface ReconcileHint {
  source: 'MachineModel' | 'Deployment' | 'Service' | 'HorizontalPodAutoscaler' | 'HTTPRoute' | 'Pod' | 'Event';
  event: 'added' | 'updated' | 'deleted' | 'relisted';
  resourceVersion?: string;
  /** "Kind/resourceVersion" of each event of a signal the informer coalesced (src/core/watch-echoes.ts). */
  versions?: string[];
  generation?: number;
  /** The MachineModel the event concerns: its own uid, or a child's controller owner's. */
  uid?: string;
}

export const reconcileSignal = defineSignal<[ReconcileHint]>('reconcile');
export interface ResyncRequest {
  requestedBy?: string;
}

export const resyncSignal = defineSignal<[ResyncRequest]>('resync');
export const deletedSignal = defineSignal<[{ uid?: string }]>('deleted');
/**
 * From the replica that owns the model's shard: the workflow runs on another queue of the install (an
 * install upgraded to shards, or a change of their count or hash), so it continues as new on this one.
 */
export const moveSignal = defineSignal<[{ taskQueue: string }]>('moveToTaskQueue');

/** One janitor per operator deployment: operators on other task queues may drive other gateways. */
export function janitorWorkflowId(taskQueue: string): string {
  return `machinemodel-gateway-janitor/${taskQueue}`;
}
export const janitorWorkflowType = 'gatewayJanitorWorkflow';
/** Sweep for orphaned gateway routes now instead of at the next interval. */
export const janitorSweepSignal = defineSignal('sweep');

export interface JanitorInput {
  intervalSeconds: number;
  /** Routes removed so far, carried across continue-as-new. */
  removed?: number;
}

/** What the workflow reports to the worker process: its rounds, for the operator's /metrics. */
export type ReconcileSinks = Sinks & { metrics: RoundMetricsSink };

export const stateQuery = defineQuery<WorkflowStateView>('state');
export const reconcileNowUpdate = defineUpdate<RoundOutcome, [ResyncRequest]>('reconcileNow');

/** What one round did and found; returned by reconcileNow and kept in the state. */
export interface RoundOutcome {
  round: number;
  phase?: Phase;
  conditions: Condition[];
  changes: string[];
  /** The object is gone (or its deletion finished): the workflow completes. */
  finished: boolean;
  message?: string;
}

/** The small state carried across continue-as-new. */
export interface CarriedState {
  uid?: string;
  phase?: Phase;
  lastGeneration?: number;
  /** Workflow time (ms) when the current rollout began; unset while Ready. */
  progressStartedAt?: number;
  notReadyChecks: number;
  /** A gateway route may exist for `uid`: it must be removed when the object goes. */
  routeRegistered?: boolean;
  rounds: number;
  signals: number;
  runs: number;
  lastOutcome?: RoundOutcome;
  /** "Kind/resourceVersion" of what the current round wrote: their watch events need no new round. */
  echoes: string[];
  /** The latest canary rollout (workflows/rollouts.ts). */
  rollout?: RolloutState;
  /** The canary's share of the requests on the route as the last round put it (0 when unset). */
  canaryShare?: number;
}

export interface MachineModelWorkflowInput {
  namespace: string;
  name: string;
  config?: Partial<WorkflowConfig>;
  state?: CarriedState;
  /** Handed over by continue-as-new: whether a round is due at once, else how long to wait first. */
  dirty?: boolean;
  nextCheckSeconds?: number;
}

export interface WorkflowStateView extends CarriedState {
  namespace: string;
  name: string;
  pendingWork: boolean;
  roundInProgress: boolean;
  config: WorkflowConfig;
}
