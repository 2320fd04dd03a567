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
} from '@kubernetes/client-node';

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
      authMethods: { default: kc },
      promiseMiddleware: [deadline],
    }),
  );
}
