import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { fail, gatewayFailure, kubeFailure } from '../../activities/failure.js';
import { GatewayMisconfigured, GatewayUnavailable } from '../../activities/gateway/driver.js';
import { errorPolicy, failureTypes, policyOf, requeueSeconds } from '../../src/core/failures.js';

/** An ApiException as the client throws it: the apiserver's metav1.Status as the body. */
function apiError(code: number, message: string, causes: { reason: string; message: string }[] = []) {
  const body = JSON.stringify({ kind: 'Status', status: 'Failure', message, code, details: { causes } });
  return new ApiException(
    code,
    `HTTP-Code: ${code}\nMessage: Unknown API Status Code!\nBody: ${body}\nHeaders: {}`,
    body,
    {},
  );
}

describe('the failure vocabulary', () => {
  it('marks exactly the retryable types as retryable when an activity throws them', () => {
    for (const [type, policy] of Object.entries(failureTypes)) {
      expect(fail(type as keyof typeof failureTypes, 'x').nonRetryable, type).toBe(policy !== 'retryable');
    }
  });

  it('decides Failed for terminal types, a deletion for a terminating namespace, a requeue for the rest', () => {
    expect(errorPolicy({ type: 'NotOwned', message: 'm' })).toEqual({
      kind: 'failed',
      reason: 'NotOwned',
      message: 'm',
    });
    expect(errorPolicy({ type: 'NamespaceTerminating', message: 'm' }).kind).toBe('deletion-pending');
    expect(errorPolicy({ type: 'GatewayUnavailable', message: 'm' })).toEqual({
      kind: 'requeue',
      reason: 'GatewayUnavailable',
      message: 'm',
      afterSeconds: requeueSeconds,
    });
  });

  it('reads a type it does not know by whether the activity said to retry it', () => {
    expect(policyOf({ type: 'Other', message: '', nonRetryable: true })).toBe('terminal');
    expect(policyOf({ type: 'Other', message: '' })).toBe('retryable');
    expect(policyOf({ message: 'a timeout' })).toBe('retryable');
  });
});

describe('Kubernetes errors as failures', () => {
  it('a terminating namespace is NamespaceTerminating, not Forbidden', () => {
    const err = apiError(
      403,
      'deployments.apps "m" is forbidden: unable to create new content in namespace ns because it is being terminated',
      [{ reason: 'NamespaceTerminating', message: 'namespace ns is being terminated' }],
    );
    const f = kubeFailure(err, 'applying children');
    expect([f.type, f.nonRetryable]).toEqual(['NamespaceTerminating', true]);
  });

  it.each([
    [403, 'Forbidden', true],
    [422, 'Rejected', true],
    [400, 'Rejected', true],
    [409, 'Conflict', false],
    [500, 'Transient', false],
    [429, 'Transient', false],
  ])('HTTP %i is %s', (code, type, nonRetryable) => {
    const f = kubeFailure(apiError(code, 'the apiserver says no'), 'reading');
    expect([f.type, f.nonRetryable]).toEqual([type, nonRetryable]);
    expect(f.message).toMatch(/^reading: the apiserver says no \(HTTP \d+\)/);
    expect(f.message).not.toContain('Headers');
  });

  it('gateway steps keep the gateway errors, and translate Kubernetes errors as Kubernetes errors', () => {
    expect(gatewayFailure(new GatewayUnavailable('down'), 'x').type).toBe('GatewayUnavailable');
    expect(gatewayFailure(new GatewayMisconfigured('no parent'), 'x').type).toBe('GatewayMisconfigured');
    expect(gatewayFailure(apiError(403, 'cannot list'), 'listing models').type).toBe('Forbidden');
  });
});
