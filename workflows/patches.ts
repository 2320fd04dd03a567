// Every patch the workflows evaluate: what it guards, the release that added it, and its stage.
// Workflow code calls patched() or deprecatePatch() only with an id from this table; a unit test holds
// both to it, requires a recorded history that carries each marker, and fails once a patch outlives
// the release after the one that follows its own (docs/workflow-versioning.md says why and how).
//
// A patch goes through Temporal's three stages, one release apart:
//   1. `patched(id)` in release N: new runs take the new path and record a marker; runs started by
//      older code replay without the marker and keep the old path.
//   2. `deprecatePatch(id)`, the old path deleted, in release N+1: every run open when N+1 rolls out
//      was started (or continued as new) by N, so it carries the marker.
//   3. the call removed in release N+2 at the latest.
// Each stage change also retires the recorded histories that only the deleted path replays.

export interface PatchRecord {
  workflow: 'machineModelWorkflow' | 'gatewayJanitorWorkflow' | 'canaryRolloutWorkflow';
  /** What the new path does that the old one did not. */
  guards: string;
  /** The release (package.json version) that first ships the patch. */
  addedIn: string;
  stage: 'patched' | 'deprecated';
}

// Every path that existed at v0.1.0 is the baseline. v0.1.0 shipped no rollout workflow, so
// canaryRolloutWorkflow's patches begin with those after v0.2.0, which shipped it.
export const patches = {
  'rollout-known-before-start': {
    workflow: 'machineModelWorkflow',
    guards:
      'a rollout is recorded before its child workflow starts, so its first report, when it comes in the same workflow task as the start, is kept (it was dropped, and the canary never came)',
    addedIn: '0.3.0',
    stage: 'deprecated',
  },
  'move-to-shard-queue': {
    workflow: 'machineModelWorkflow',
    guards:
      "a model's workflow told by its shard's owner that it runs on another queue of the install continues as new on its shard's queue",
    addedIn: '0.3.0',
    stage: 'deprecated',
  },
  'answer-before-continue': {
    workflow: 'machineModelWorkflow',
    guards:
      'a run about to continue as new while a reconcileNow waits for the next round runs that round first, or, its object gone, answers it with the last (it waited for all handlers to finish, forever)',
    addedIn: '0.3.0',
    stage: 'deprecated',
  },
  'reports-bound-to-run': {
    workflow: 'machineModelWorkflow',
    guards:
      'a rollout report counts only when it names the recorded rollout run and that rollout still runs; an ignored report costs no round (one for an ended rollout could move the stable Deployment)',
    addedIn: '0.3.0',
    stage: 'deprecated',
  },
  'invalid-spec-withdraws-canary': {
    workflow: 'machineModelWorkflow',
    guards:
      "a round that finds the spec invalid cancels the running rollout, takes the canary's share off the route and removes the canary (the canary kept its share forever)",
    addedIn: '0.3.0',
    stage: 'deprecated',
  },
  'look-asks-again': {
    workflow: 'canaryRolloutWorkflow',
    guards:
      "a rollout that looks at its canary reports its ask again while the model's round has not answered it (a lost ask left it waiting for its ready deadline)",
    addedIn: '0.3.0',
    stage: 'deprecated',
  },
  'stable-clock': {
    workflow: 'machineModelWorkflow',
    guards:
      "the loop's decisions (the rate limit, the run's age bound, a round's progress deadline) read workflow time only at wakes: read right after a local activity it differed when a worker without the run cached replayed it, and the run failed every later task as nondeterministic",
    addedIn: '0.4.0',
    stage: 'patched',
  },
} as const satisfies Record<string, PatchRecord>;

export type PatchId = keyof typeof patches;
