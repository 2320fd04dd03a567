import type { BuildOptions } from '../src/core/desired-state.js';
import type { GatewayDriver } from './gateway/driver.js';
import type { KubeClient } from './kube-client.js';

/** What every activity is created with. */
export interface ActivityDeps {
  kube: KubeClient;
  build: BuildOptions;
  /** The API gateway models are published on; none configured when undefined. */
  gateway?: GatewayDriver;
}
