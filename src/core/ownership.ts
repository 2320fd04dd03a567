// Who controls an existing child object. Pure.
import { isModelController, type ModelRef } from './api.js';

interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
}

export type Ownership =
  | 'absent'
  /** Controlled by this MachineModel. */
  | 'ours'
  /** Controlled by an earlier MachineModel of the same name that was deleted; the garbage collector will remove it. */
  | 'previous'
  /** Anyone else's: never touched. */
  | 'foreign';

export function ownershipOf(
  live: { metadata?: { ownerReferences?: OwnerReference[] } } | undefined,
  ref: ModelRef,
): Ownership {
  if (!live) return 'absent';
  const controller = live.metadata?.ownerReferences?.find((o) => o.controller);
  if (controller?.uid === ref.uid) return 'ours';
  if (controller && isModelController(controller) && controller.name === ref.name) return 'previous';
  return 'foreign';
}
