// Where a MachineModel stands with its first round, as its status tells. The informer starts the
// workflows of new models a bounded number at a time (src/informer/start-gate.ts) and reads here
// which models are new and when one no longer needs the worker's attention. Pure.

/** How many new models may be starting at once while a bulk apply is still arriving. */
export interface ArrivalBurst {
  /** More new models than this seen within `windowMs`: an apply is still arriving. */
  arrivals: number;
  windowMs: number;
  /** The bound meanwhile, so that the user's own requests go first. */
  maxStarting: number;
}

/**
 * How many new models start at once, how long a started one that neither gets Ready nor stalls
 * (a large image's pull, a crash loop) may hold up the models behind it, and the smaller bound while
 * a bulk apply arrives (a single `kubectl apply` of a few models never counts as one).
 */
export const startGateDefaults = {
  maxStarting: 64,
  holdLimitMs: 120_000,
  burst: { arrivals: 16, windowMs: 2_000, maxStarting: 4 } as ArrivalBurst,
};

/**
 * The bound on new models starting at once, given when new models were last seen (ascending, ms):
 * the burst's while more than `burst.arrivals` arrived within its window, the full one otherwise.
 * Also returns when the burst's bound ends if nothing else arrives (undefined: it does not apply).
 */
export function startBound(
  maxStarting: number,
  burst: ArrivalBurst,
  arrivals: readonly number[],
  now: number,
): { bound: number; until?: number } {
  const recent = arrivals.filter((t) => t > now - burst.windowMs);
  if (recent.length <= burst.arrivals || burst.maxStarting >= maxStarting) return { bound: maxStarting };
  // Once the (arrivals+1)-th latest arrival leaves the window, at most `arrivals` remain in it.
  return { bound: burst.maxStarting, until: recent[recent.length - burst.arrivals - 1]! + burst.windowMs };
}

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
