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

/**
 * Whether the step that reads the object may apply its children in the same step: a round that can
 * only be an apply of a valid spec, adding no finalizer, of the object the workflow follows (or meets
 * first). A new object of a followed name has its predecessor's route removed first, and every other
 * round decides between reading and writing. One step instead of two is one workflow activation less.
 */
export function appliesWithRead(
  model: {
    deleting: boolean;
    hasFinalizer: boolean;
    specErrors: string[];
    ref: { uid: string };
    gatewayConfigured?: boolean;
  } | null,
  followedUid: string | undefined,
): boolean {
  if (!model || model.specErrors.length > 0) return false;
  if (followedUid !== undefined && followedUid !== model.ref.uid) return false;
  const lifecycle = lifecycleOf(model, model.gatewayConfigured !== false);
  return lifecycle.step === 'apply' && !lifecycle.addFinalizer;
}

/**
 * Whether the step that read the object and applied its children may write its status too: a round
 * with nothing between the apply and the status, that is no gateway to publish on (or no route yet
 * for a model not ready) and no rollout (the workflow does not ask while it follows one). One step
 * for the round is two activations less.
 */
export function reportsWithApply(
  model: { gatewayConfigured?: boolean; spec: { rollout?: unknown } },
  applied: { canary?: boolean },
  verdict: { kind: string },
): boolean {
  const publishes = model.gatewayConfigured !== false && verdict.kind === 'ready';
  return !publishes && !model.spec.rollout && !applied.canary;
}
