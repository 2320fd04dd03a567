// How activities fail: always with a type from the failure vocabulary (src/core/failures.ts), which
// decides whether Temporal retries it. Kubernetes and gateway errors are translated here, once.
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { failureTypes, type FailureType } from '../src/core/failures.js';
import { apiMessage, apiStatus, isNamespaceTerminating } from '../src/process/kube-errors.js';
import { GatewayMisconfigured, GatewayUnavailable } from './gateway/driver.js';

export function fail(type: FailureType, message: string): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: failureTypes[type] !== 'retryable' });
}

/**
 * A Kubernetes API error as a failure of the vocabulary, with the apiserver's own message rather
 * than the client's dump of the response: terminal when retrying cannot help (the request itself
 * is wrong, the operator lacks a permission), retryable otherwise.
 */
export function kubeFailure(err: unknown, action: string): ApplicationFailure {
  if (err instanceof ApplicationFailure) return err;
  // A request its activity's cancellation or worker stop ended: thrown as it is, not as an apiserver
  // failure. Temporal retries the activity where its task goes next (the shard's next owner).
  if (err instanceof CancelledFailure) throw err;
  const status = apiStatus(err);
  const message = `${action}: ${apiMessage(err)}`;
  if (isNamespaceTerminating(err)) return fail('NamespaceTerminating', message);
  if (status === 403) return fail('Forbidden', `${message} (grant the operator's ServiceAccount this permission)`);
  if (status === 400 || status === 422) return fail('Rejected', message);
  if (status === 409) return fail('Conflict', message);
  return fail('Transient', message);
}

/**
 * An error of a gateway step: the gateway's own errors keep their meaning; anything else came from
 * the Kubernetes API (reading or listing MachineModels) and is translated as such.
 */
export function gatewayFailure(err: unknown, action: string): ApplicationFailure {
  if (err instanceof GatewayMisconfigured) return fail('GatewayMisconfigured', err.message);
  if (err instanceof GatewayUnavailable) return fail('GatewayUnavailable', err.message);
  return kubeFailure(err, action);
}
