import { describe, expect, it } from 'vitest';
import { httpRoute, isModelRoute, routeOwner } from '../../activities/gateway/gateway-api-driver.js';
import { childLabels, defaultBuildOptions } from '../../src/core/desired-state.js';
import { routeIdAnnotation } from '../../src/core/api.js';
import { routeId, routeSpec } from '../../src/core/route-rules.js';

// Tenant A's model, and what the operator writes for it.
const a = { namespace: 'tenant-a', name: 'clf', uid: 'uid-a' };
const spec = { image: 'r/m:1', modelPath: '/m', resources: { cpu: '1', memory: '1Gi' } };
const parent = { namespace: 'gw', name: 'public' };
const ours = () => httpRoute(routeSpec(a, spec, defaultBuildOptions), parent);
const controllerRef = { apiVersion: 'stable.example.com/v1', kind: 'MachineModel', name: 'clf', uid: 'uid-a' };

/** What a tenant who may create HTTPRoutes can write: the operator's label and route-id annotation naming A. */
function forged(namespace: string, name: string, ownerReferences?: object[]) {
  return {
    metadata: {
      namespace,
      name,
      labels: childLabels(name),
      annotations: { [routeIdAnnotation]: routeId(a) },
      ...(ownerReferences ? { ownerReferences: ownerReferences as (typeof controllerRef)[] } : {}),
    },
  };
}

describe("which HTTPRoutes are the operator's", () => {
  it("the route the driver creates: in the model's namespace, named after it, controlled by its uid", () => {
    const route = ours();
    expect(route.metadata.ownerReferences).toEqual([{ ...controllerRef, controller: true, blockOwnerDeletion: true }]);
    expect(isModelRoute(route, a)).toBe(true);
    expect(routeOwner(route)).toEqual(a);
  });

  it('a route in another namespace is foreign, even with the label, annotation and ownerReference', () => {
    const inB = forged('tenant-b', 'clf', [{ ...controllerRef, controller: true }]);
    expect(isModelRoute(inB, a)).toBe(false);
    expect(routeOwner(inB)).toBeUndefined();
  });

  it("a route under another name in the model's namespace is foreign", () => {
    const renamed = forged('tenant-a', 'clf-copy', [{ ...controllerRef, controller: true }]);
    expect(routeOwner(renamed)).toBeUndefined();
  });

  it('the right label and annotation without an ownerReference is foreign', () => {
    expect(routeOwner(forged('tenant-a', 'clf'))).toBeUndefined();
    expect(routeOwner(forged('tenant-a', 'clf', []))).toBeUndefined();
    expect(isModelRoute(forged('tenant-a', 'clf'), a)).toBe(false);
  });

  it('an ownerReference to another uid is foreign', () => {
    const other = forged('tenant-a', 'clf', [{ ...controllerRef, uid: 'uid-b', controller: true }]);
    expect(routeOwner(other)).toBeUndefined();
    expect(isModelRoute(other, a)).toBe(false);
  });

  it('an ownerReference that is not the controller is foreign', () => {
    expect(routeOwner(forged('tenant-a', 'clf', [controllerRef]))).toBeUndefined();
    expect(routeOwner(forged('tenant-a', 'clf', [{ ...controllerRef, controller: false }]))).toBeUndefined();
    // The controller is someone else, with A's model as a mere owner.
    const shared = forged('tenant-a', 'clf', [
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'x', uid: 'uid-x', controller: true },
      controllerRef,
    ]);
    expect(routeOwner(shared)).toBeUndefined();
  });

  it('a controller with the uid but not a MachineModel, or under another name, is foreign', () => {
    const kinds = [
      { ...controllerRef, kind: 'Deployment' },
      { ...controllerRef, apiVersion: 'evil.example.com/v1' },
      { ...controllerRef, name: 'other' },
    ];
    for (const ref of kinds)
      expect(routeOwner(forged('tenant-a', 'clf', [{ ...ref, controller: true }]))).toBeUndefined();
  });

  it('the annotation must name the model that controls the route', () => {
    const route = ours();
    route.metadata.annotations[routeIdAnnotation] = routeId({ ...a, uid: 'uid-stale' });
    expect(routeOwner(route)).toBeUndefined();
    route.metadata.annotations[routeIdAnnotation] = 'someone-elses-route';
    expect(routeOwner(route)).toBeUndefined();
    // isModelRoute itself does not read the annotation: the controller reference decides.
    expect(isModelRoute(route, a)).toBe(true);
  });

  it("a route of an earlier MachineModel of the same name is still the operator's (the janitor may remove it)", () => {
    const earlier = { ...a, uid: 'uid-earlier' };
    expect(routeOwner(httpRoute(routeSpec(earlier, spec, defaultBuildOptions), parent))).toEqual(earlier);
  });
});
