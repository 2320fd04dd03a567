// Whether a namespace's deletion is still under way, for the deletion lane (src/informer/deletion-lane.ts),
// which holds the `deleted` signals of its models' workflows until no such deletion is. Pure.
//
// A namespace counts while it is making progress the operator would slow down: a model in it that
// will go (it waits on no finalizer but ours), or a model that went a moment ago (the namespace's
// other objects go after its models). A namespace kept terminating by a finalizer not ours (a
// tenant's, on a model or on any other object) makes no progress, so it must not hold back every
// other namespace's deletions: it counts for at most `settleMs` after its last model went, and not
// at all while a model in it waits on a finalizer not ours (else releasing them one at a time, each
// within `settleMs` of the last, would hold the others' for the lane's whole limit).
import { finalizerName } from './api.js';

/** A namespace being deleted, as the informer's caches see it. */
export interface TerminatingNamespace {
  /** The finalizers of each model the cache still holds in it; 'unknown' when no usable cache covers it. */
  modelFinalizers: readonly (readonly string[])[] | 'unknown';
  /** Milliseconds since the lane last held one of its models' deletions; undefined when it holds none. */
  sinceLastHeldMs: number | undefined;
}

/** How long a namespace counts after its last model went: its other objects go meanwhile. */
export const settleMs = 15_000;

export function deletionUnderWay(ns: TerminatingNamespace, settle = settleMs): boolean {
  const goes = (finalizers: readonly string[]) => finalizers.every((f) => f === finalizerName);
  if (ns.modelFinalizers !== 'unknown') {
    if (ns.modelFinalizers.some(goes)) return true;
    if (ns.modelFinalizers.length > 0) return false;
  }
  return ns.sinceLastHeldMs !== undefined && ns.sinceLastHeldMs < settle;
}
