// Every patch the workflows evaluate: what it guards, when it came, and when it can go. Workflow code
// calls patched() only with an id from this table (a unit test holds both to it, and requires a
// recorded history that carries each marker).
//
// A patch goes through Temporal's three stages:
//   1. `patched(id)`: new runs take the new path and record a marker; runs started by older code
//      replay without the marker and keep the old path.
//   2. `deprecatePatch(id)`, the old path deleted: once no open run was started by code without the
//      patch.
//   3. the call removed: once no open run was started by code without `deprecatePatch(id)`.
// Each stage change also retires the recorded histories that only the deleted path replays.
//
// How long a run of older code can stay open: a MachineModel workflow continues as new after
// `maxRoundsPerRun` (100) rounds or when the server suggests it, and an idle model runs a round at
// least every `driftCheckSeconds` (600 s by default), so a run ends within about 100 × 10 min ≈ 17 h.
// Longer only while a round is stuck in an activity that keeps retrying (an apiserver away for that
// long) or with a longer --drift-check. The gateway janitor continues as new every 50 sweeps (50 min
// at the default 60 s). So a stage may change one day after the last worker without it stopped, and
// only after this query, run against the production namespace, counts 0:
//   temporal workflow count --query \
//     "WorkflowType IN ('machineModelWorkflow','gatewayJanitorWorkflow') AND ExecutionStatus='Running'
//      AND StartTime < '<when the last worker without the change stopped>'"
//
// Run versions: a patch costs every run two history events, its marker and the TemporalChangeVersion
// search attribute that the SDK's core upserts beside it (six of the 36 events a model took to Ready
// with three patches). So the code that starts a MachineModel run (the informer, mmctl, continue-as-new)
// also hands it `runVersion`, and a run at or above a patch's `sinceRunVersion` takes the new path
// without asking patched(): it was started by code that has the path. A run without it (started by
// older code) still asks. Adding a path to the run version is a new `currentRunVersion`, never a change
// to an existing patch's number; a patch whose `sinceRunVersion` is set keeps its stages as above.
// The limit: a run trusts every worker that runs its tasks to know the paths of its run version, at
// least as patches: such a worker records their markers, which replay meets (run-version.ts; the
// replay test proves it). So a new path first ships as a plain patch (no `sinceRunVersion`), and joins
// a new run version only in a later release, once no worker without that patch can still run beside
// one that starts runs at the new version. Version 1's patches all shipped before it (9ff565a and
// after); a worker older than 9ff565a must not run beside one that starts runs at version 1: upgrade
// from 9ff565a or later, or stop the old workers first.

/** The run version that this code starts MachineModel runs at. */
export const currentRunVersion = 1;

export interface PatchRecord {
  workflow: 'machineModelWorkflow' | 'gatewayJanitorWorkflow';
  /** What the new path does that the old one did not. */
  guards: string;
  /** The commit (and its date) that introduced it. */
  added: string;
  stage: 'patched' | 'deprecated';
  /** What must be true before the next stage. */
  next: string;
  /** Runs started at this run version or later take the new path without a marker. */
  sinceRunVersion?: number;
}

export const patches = {
  'gateway-registration': {
    workflow: 'machineModelWorkflow',
    guards: 'publishing Ready models on the gateway and removing their routes before the finalizer',
    added: '4c7ca61 (2026-11-22)',
    stage: 'patched',
    next:
      'deprecate once no run started before the first release with a gateway is open; the recorded ' +
      'history seed-example-upgraded-to-gateway.json (which replays both paths) then retires',
    sinceRunVersion: 1,
  },
  'finish-ignores-own-signals': {
    workflow: 'machineModelWorkflow',
    guards: 'a finished run continues as new only for signals that may concern another object of its name',
    added: 'a1f244d (2026-11-22)',
    stage: 'patched',
    next: 'deprecate once no run started before a1f244d is open (one day after its rollout and the query above)',
    sinceRunVersion: 1,
  },
  'cheap-rounds': {
    workflow: 'machineModelWorkflow',
    guards:
      "Kubernetes steps tried first as local activities; watch events of the round's own writes wake no " +
      'round; a deletion without a gateway removes the finalizer without writing a Deleting status first',
    added: 'fd1d0b0 (2026-11-23)',
    stage: 'patched',
    next: 'deprecate once no run started before it is open (one day after its rollout and the query above)',
    sinceRunVersion: 1,
  },
  'finalizer-only-with-gateway': {
    workflow: 'machineModelWorkflow',
    guards: 'without a gateway a round adds no finalizer (a finalizer already there is still removed on deletion)',
    added: '9ff565a (2026-11-23)',
    stage: 'patched',
    next: 'deprecate once no run started before it is open (one day after its rollout and the query above)',
    sinceRunVersion: 1,
  },
  'gateway-local-first': {
    workflow: 'machineModelWorkflow',
    guards:
      'gateway steps (publish, remove a route) tried first as local activities, then as regular ones with ' +
      'their retry policy',
    added: 'the commit that adds it (2026-11-24)',
    stage: 'patched',
    next:
      'join a run version in a later release (patches.ts, "Run versions"); deprecate once no run started ' +
      'before it is open',
  },
  'gateway-collisions': {
    workflow: 'gatewayJanitorWorkflow',
    guards: 'the janitor withdraws the younger of two routes whose prefixes collide',
    added: '3144e99 (2026-11-22)',
    stage: 'patched',
    next: 'deprecate once no janitor run started before 3144e99 is open (50 sweeps after its rollout)',
  },
} as const satisfies Record<string, PatchRecord>;

export type PatchId = keyof typeof patches;
