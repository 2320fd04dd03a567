// The gateway driver the configuration names, for the activities that publish models' routes.
import type { KubernetesObject } from '@kubernetes/client-node';
import { CaddyFleet } from '../../activities/gateway/caddy-fleet.js';
import type { GatewayDriver } from '../../activities/gateway/driver.js';
import { GatewayApiDriver } from '../../activities/gateway/gateway-api-driver.js';
import type { KubeClient } from '../../activities/kube-client.js';
import type { GatewayConfig } from '../process/config.js';

export function gatewayDriver(config: GatewayConfig, kube: KubeClient): GatewayDriver | undefined {
  switch (config.kind) {
    case 'caddy':
      return new CaddyFleet(config, async (namespace, name) => {
        const service = await kube.read<KubernetesObject & { spec?: { clusterIP?: string } }>(
          'v1',
          'Service',
          namespace,
          name,
        );
        const ip = service?.spec?.clusterIP;
        return ip && ip !== 'None' ? ip : undefined;
      });
    case 'gateway-api':
      return new GatewayApiDriver(kube, config);
    case 'none':
      return undefined;
  }
}
