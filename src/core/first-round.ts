// Where a MachineModel stands with its first round, as its status tells. The informer starts the
// workflows of new models a bounded number at a time (src/informer/start-gate.ts) and reads here
// which models are new and when one no longer needs the worker's attention. Pure.

/**
 * How many new models start at once, and how long a started one that neither gets Ready nor stalls
 * (a large image's pull, a crash loop) may hold up the models behind it.
 */
export const startGateDefaults = { maxStarting: 64, holdLimitMs: 120_000 };

/** The fields of a MachineModel these decisions read. */
export interface FirstRoundView {
  metadata?: { generation?: number; deletionTimestamp?: unknown };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string }[] } | null;
}

/**
 * No round has written its status yet: its workflow has not run (or has only just started). A model
 * being deleted is not new: its deletion must reach the workflow whatever waits.
 */
export function awaitsFirstRound(model: FirstRoundView): boolean {
  return !model.metadata?.deletionTimestamp && model.status?.observedGeneration === undefined;
}

/**
 * A round has looked at the current spec and the model is not progressing: Ready, or Stalled until a
 * person or the cluster changes something. Either way its workflow is now idle until an event.
 */
export function settled(model: FirstRoundView): boolean {
  const s = model.status;
  if (s?.observedGeneration === undefined || s.observedGeneration !== model.metadata?.generation) return false;
  return s.conditions?.find((c) => c.type === 'Reconciling')?.status !== 'True';
}
