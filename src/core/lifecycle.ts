// What a round does with the object it read: the finalizer state table (after kube-rs's finalizer()),
// plus the one state a durable per-name workflow adds: the object is gone. Pure.
//
// A finalizer is only needed while something outside the object's namespace (a gateway route) may
// have to be cleaned up: without a gateway, the object's children go with it through their owner
// references, and a finalizer would only make every deletion (and a namespace's) wait on the operator.
//
//   object   | deletionTimestamp | our finalizer | needs one | round
//   ---------|-------------------|---------------|-----------|------------------------------------------
//   absent   |                   |               |           | gone: remove what it left outside its namespace; finish
//   present  | no                | no            | yes       | add the finalizer, then apply (in the same round)
//   present  | no                | no            | no        | apply
//   present  | no                | yes           |           | apply
//   present  | yes               | yes           |           | clean up, then remove the finalizer; finish
//   present  | yes               | no            |           | clean up (nothing waits on us); finish

export type Lifecycle =
  { step: 'apply'; addFinalizer: boolean } | { step: 'cleanup'; removeFinalizer: boolean } | { step: 'gone' };

export function lifecycleOf(
  model: { deleting: boolean; hasFinalizer: boolean } | null,
  needsFinalizer: boolean,
): Lifecycle {
  if (!model) return { step: 'gone' };
  if (model.deleting) return { step: 'cleanup', removeFinalizer: model.hasFinalizer };
  return { step: 'apply', addFinalizer: needsFinalizer && !model.hasFinalizer };
}
