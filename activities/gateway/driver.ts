import type { ModelRef } from '../../src/core/api.js';
import type { ExistingRoute, RouteSpec } from '../../src/core/route-rules.js';
import type { TrafficSample } from '../../src/core/rollout.js';

/** One API gateway. Every method is idempotent. */
export interface GatewayDriver {
  readonly kind: 'caddy' | 'gateway-api';
  /** Routes on the gateway that requests could match: ours (with owner) and, where visible, others'. */
  list(): Promise<ExistingRoute[]>;
  /** Creates or replaces the route; true when something changed. */
  put(route: RouteSpec): Promise<boolean>;
  /** Removes the route with this id; false when it was not there. */
  remove(id: string, owner: ModelRef): Promise<boolean>;
  /**
   * The requests the route's canary answered, and how many with 5xx, as the gateway counts them;
   * absent where the gateway does not count them per backend.
   */
  traffic?(routeId: string): Promise<TrafficSample>;
  /** Where clients reach the route. */
  publicURL(route: RouteSpec): string;
}

/** The gateway could not be reached or refused the request: retrying later may help. */
export class GatewayUnavailable extends Error {
  override name = 'GatewayUnavailable';
}

/** The gateway's configuration cannot serve this route (missing parent, bad setup): a person must act. */
export class GatewayMisconfigured extends Error {
  override name = 'GatewayMisconfigured';
}
