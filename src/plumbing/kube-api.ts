// Kubernetes API clients whose every request gives up after a deadline. The generated clients set
// none, so a request on a connection that died silently would hang its activity (and a graceful
// shutdown waiting for it) or an informer's list for as long as TCP takes to notice: minutes.
import {
  createConfiguration,
  KubeConfig,
  ServerConfiguration,
  type Configuration,
  type RequestContext,
  type ResponseContext,
  type SecurityAuthentication,
} from '@kubernetes/client-node';

/**
 * client-node 2.0 builds a new undici Agent for every request (`KubeConfig.applySecurityAuthentication`),
 * so every request paid a TLS handshake on a new connection: the largest share of the operator's CPU
 * in the converge benchmark. This keeps the first Agent built for a KubeConfig and gives it to every
 * later request, so connections are pooled and kept alive. Headers (a bearer token read again from
 * its file) are still set per request; a client certificate that an exec plugin rotates would need
 * a restart to take effect.
 */
function reusingConnections(kc: KubeConfig): SecurityAuthentication {
  let shared: ReturnType<RequestContext['getDispatcher']>;
  return {
    getName: () => kc.getName(),
    async applySecurityAuthentication(ctx: RequestContext) {
      await kc.applySecurityAuthentication(ctx);
      const built = ctx.getDispatcher();
      if (!built) return;
      shared ??= built;
      ctx.setDispatcher(shared);
    },
  };
}

const connectionReusing = new WeakMap<KubeConfig, SecurityAuthentication>();

/** Well under the activities' start-to-close timeout, so a stuck call fails in time to be retried. */
export const requestTimeoutMs = 15_000;

export function apiClient<T>(kc: KubeConfig, type: new (config: Configuration) => T, timeoutMs = requestTimeoutMs): T {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no current cluster');
  const deadline = {
    pre: async (ctx: RequestContext) => {
      ctx.setSignal(AbortSignal.timeout(timeoutMs));
      return ctx;
    },
    post: async (res: ResponseContext) => res,
  };
  return new type(
    createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: {
        default: connectionReusing.get(kc) ?? connectionReusing.set(kc, reusingConnections(kc)).get(kc)!,
      },
      promiseMiddleware: [deadline],
    }),
  );
}
