// Whether a model's route may be published for its namespace, reading the Namespace's delegation only
// when the route asks for more than /models/<namespace>/ (most routes: no read at all).
import {
  delegationOf,
  needsDelegation,
  routeRefusal,
  type Delegation,
  type RouteSpec,
} from '../src/core/route-rules.js';
import type { ActivityDeps } from './deps.js';

export type DelegationReader = (namespace: string) => Promise<Delegation>;

/** The delegation of a namespace, read from its annotations. */
export const readDelegation =
  (kube: ActivityDeps['kube']): DelegationReader =>
  async (namespace) =>
    delegationOf(await kube.namespaceAnnotations(namespace));

export async function routeRefusalFor(route: RouteSpec, delegationIn: DelegationReader) {
  return needsDelegation(route) ? routeRefusal(route, await delegationIn(route.namespace)) : undefined;
}
