// Who an object is, for the model cache: the very URL its bytes come from, so a Secret whose
// endpoint has a path, or a region with a host in it, cannot name another tenant's object.
import { describe, expect, it } from 'vitest';
import { modelSource } from '../../src/core/model-source.js';
import { objectIdentity, refusedAddress, storeEnvProblem } from '../../src/csi/store-request.js';

const source = modelSource('s3://victim-bucket/m/model.bin');
if (source.kind !== 's3') throw new Error('not s3');

describe("an object's identity in the node's cache", () => {
  it('is the URL the bytes come from: an endpoint with a path of its own names another object', () => {
    const store = { AWS_ENDPOINT_URL: 'https://s3.us-east-1.amazonaws.com' };
    const victim = objectIdentity(source, store);
    expect(victim).toBe(JSON.stringify(['s3', 'https://s3.us-east-1.amazonaws.com/victim-bucket/m/model.bin']));
    const attacker = objectIdentity(source, { AWS_ENDPOINT_URL: 'https://s3.us-east-1.amazonaws.com/attacker-bucket' });
    expect(attacker).not.toBe(victim);
    expect(objectIdentity(source, {})).toBe(victim);
  });

  it('refuses an endpoint or region a tenant could hide another host or path in', () => {
    expect(storeEnvProblem({ AWS_REGION: 'us-east-1.amazonaws.com/attacker-bucket#' })).toMatch(/not a region name/);
    expect(storeEnvProblem({ AWS_ENDPOINT_URL: 'blob:https://x' })).toMatch(/http:\/\/ or https:\/\//);
    expect(storeEnvProblem({ AWS_ENDPOINT_URL: 'https://u:p@store' })).toMatch(/without credentials/);
    expect(storeEnvProblem({ AWS_ENDPOINT_URL: 'https://store/?x=1' })).toMatch(/query/);
    expect(storeEnvProblem({ AWS_ENDPOINT_URL: 'not a url' })).toMatch(/not a URL/);
    expect(storeEnvProblem({ AWS_ENDPOINT_URL: 'http://store.ns.svc:8333', AWS_REGION: 'eu-west-1' })).toBeUndefined();
  });

  it("never asks the node's metadata service", () => {
    expect(refusedAddress(new URL('http://169.254.169.254/latest'))).toMatch(/link-local/);
    expect(refusedAddress(new URL('http://[fd00:ec2::254]/'))).toMatch(/link-local/);
    // The same address written as IPv6 (helper-3's review: the URL parser writes it in hex).
    for (const host of [
      '[::ffff:169.254.169.254]',
      '[::ffff:a9fe:a9fe]',
      '[::a9fe:a9fe]',
      '[64:ff9b::a9fe:a9fe]',
      '[fe80::1]',
    ])
      expect(refusedAddress(new URL(`http://${host}/`))).toMatch(/link-local/);
    expect(refusedAddress(new URL('http://[::ffff:10.0.0.1]/'))).toBeUndefined();
    expect(refusedAddress(new URL('http://10.0.0.1:8333/'))).toBeUndefined();
  });
});
