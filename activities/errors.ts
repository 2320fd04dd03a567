import { ApplicationFailure } from '@temporalio/common';
import { apiMessage, apiStatus } from '../src/plumbing/kube-errors.js';

/** Failure types the workflow turns into a Failed phase instead of retrying. */
export const permanentFailureTypes = {
  invalidSpec: 'InvalidSpec',
  notOwned: 'NotOwned',
  rejected: 'Rejected',
  forbidden: 'Forbidden',
} as const;

export function permanent(type: string, message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type);
}

/**
 * Turns an API error into a non-retryable failure when retrying cannot help (the request itself is
 * wrong, or the operator lacks permission), and into a retryable one with a readable message otherwise.
 */
export function classify(err: unknown, action: string): Error {
  if (err instanceof ApplicationFailure) return err;
  const status = apiStatus(err);
  const message = `${action}: ${apiMessage(err)}`;
  if (status === 403)
    return permanent(
      permanentFailureTypes.forbidden,
      `${message} (grant the operator's ServiceAccount this permission)`,
    );
  if (status === 400 || status === 422) return permanent(permanentFailureTypes.rejected, message);
  return ApplicationFailure.retryable(message, status ? `HTTP${status}` : 'Transient');
}
