// Every way a reconcile step can fail, and what the reconcile does about it. Activities throw these
// types (activities/failure.ts); the workflow reads them through errorPolicy(). Pure.

/**
 * - `terminal`: retrying cannot help until someone changes something; the activity is not retried and
 *   the model's phase becomes Failed with the failure's reason and message.
 * - `retryable`: the activity's retry policy tries again with exponential backoff; the round waits.
 * - `deletion`: not a failure at all: the model is about to be deleted with its namespace.
 */
export type FailurePolicy = 'terminal' | 'retryable' | 'deletion';

export const failureTypes = {
  /** The spec breaks a rule of the schema (an object that reached the API around the CRD's validation). */
  InvalidSpec: 'terminal',
  /** A Deployment, Service, HPA or HTTPRoute of the model's name exists and is someone else's. */
  NotOwned: 'terminal',
  /** The apiserver refused the request itself (400, 422). */
  Rejected: 'terminal',
  /** The operator's ServiceAccount lacks a permission (403). */
  Forbidden: 'terminal',
  /** The gateway cannot serve the route as configured (missing parent Gateway, CRDs, permissions). */
  GatewayMisconfigured: 'terminal',
  /** The namespace is being deleted: nothing new may be created in it, and the model goes with it. */
  NamespaceTerminating: 'deletion',
  /** A child still belongs to a deleted MachineModel of the same name; the garbage collector removes it. */
  PreviousOwner: 'retryable',
  /** The object changed between our read and our write. */
  Conflict: 'retryable',
  /** The apiserver could not answer now: unreachable, timed out, 5xx, 429, a kind not served yet. */
  Transient: 'retryable',
  /** The gateway could not be reached or did not confirm. */
  GatewayUnavailable: 'retryable',
} as const satisfies Record<string, FailurePolicy>;

export type FailureType = keyof typeof failureTypes;

/** A failure as the workflow receives it from an activity. */
export interface StepFailure {
  type?: string;
  message: string;
  /** Whether the activity said not to retry it (for types not in this vocabulary). */
  nonRetryable?: boolean;
}

export function policyOf(f: StepFailure): FailurePolicy {
  const known = f.type !== undefined && f.type in failureTypes ? failureTypes[f.type as FailureType] : undefined;
  return known ?? (f.nonRetryable ? 'terminal' : 'retryable');
}

/** Where a retryable failure that reached the workflow (a step with an attempt limit) looks again. */
export const requeueSeconds = 30;

/** What a round does with a failed step (kube-rs's error_policy; controller-runtime's returned error). */
export type ErrorDecision =
  | { kind: 'failed'; reason: string; message: string }
  | { kind: 'deletion-pending'; message: string }
  | { kind: 'requeue'; reason: string; message: string; afterSeconds: number };

export function errorPolicy(f: StepFailure): ErrorDecision {
  const reason = f.type ?? 'ReconcileError';
  switch (policyOf(f)) {
    case 'terminal':
      return { kind: 'failed', reason, message: f.message };
    case 'deletion':
      return { kind: 'deletion-pending', message: `${f.message}; the model is deleted with its namespace` };
    case 'retryable':
      return { kind: 'requeue', reason, message: f.message, afterSeconds: requeueSeconds };
  }
}
