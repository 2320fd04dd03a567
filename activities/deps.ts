import type { BuildOptions } from '../src/desired-state.js';
import type { KubeClient } from './kube-client.js';

/** What every activity is created with. */
export interface ActivityDeps {
  kube: KubeClient;
  build: BuildOptions;
}
