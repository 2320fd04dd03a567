// Kubernetes API clients that keep their connections and whose every request gives up after a
// deadline. The generated clients set none, so a request on a connection that died silently would
// hang its activity (and a graceful shutdown waiting for it) or an informer's list for as long as TCP
// takes to notice: minutes.
import {
  createConfiguration,
  HttpMethod,
  KubeConfig,
  RequestContext,
  ResponseContext,
  SelfDecodingBody,
  ServerConfiguration,
  wrapHttpLibrary,
  type Configuration,
  type HttpLibrary,
  type SecurityAuthentication,
} from '@kubernetes/client-node';
import { request, type Dispatcher } from 'undici';

/** Well under the activities' start-to-close timeout, so a stuck call fails in time to be retried. */
export const requestTimeoutMs = 15_000;

/**
 * The connections every client of one KubeConfig shares. client-node 2.0 builds a new undici Agent
 * for every request (`KubeConfig.applySecurityAuthentication`), so every request paid a TLS handshake
 * on a new connection: the largest share of the operator's CPU in the converge benchmark. Here the
 * first Agent built serves every later request, so connections are pooled and kept alive. A pooled
 * connection can die without a close (a vanished peer); a request that gets no answer by its
 * deadline drops the Agent with all its connections, and the next request builds a new one.
 * Headers (a bearer token read again from its file) are still set per request; a client certificate
 * that an exec plugin rotates takes effect when the Agent is next rebuilt.
 */
class Connections {
  private shared: ReturnType<RequestContext['getDispatcher']>;

  constructor(private readonly kc: KubeConfig) {}

  readonly auth: SecurityAuthentication = {
    getName: () => this.kc.getName(),
    applySecurityAuthentication: async (ctx) => {
      await this.kc.applySecurityAuthentication(ctx);
      const built = ctx.getDispatcher();
      if (!built) return;
      this.shared ??= built;
      ctx.setDispatcher(this.shared);
    },
  };

  drop(): void {
    const dropped = this.shared;
    this.shared = undefined;
    dropped?.destroy().catch(() => undefined);
  }
}

const connections = new WeakMap<KubeConfig, Connections>();

/**
 * One request with undici's `request`, on the dispatcher client-node's authentication chose: the
 * same connections, headers and TLS as client-node's own `fetch`, without the WHATWG Request,
 * Headers and stream objects `fetch` builds around every call (bench/journal.md, "Shared
 * workflow modules and Kubernetes requests without `fetch`").
 */
async function send(ctx: RequestContext): Promise<ResponseContext> {
  const res = await request(ctx.getUrl(), {
    method: ctx.getHttpMethod() as Dispatcher.HttpMethod,
    headers: ctx.getHeaders(),
    // The generated clients send JSON or YAML text; none of the operator's calls sends a form.
    body: ctx.getBody() as string | undefined,
    signal: ctx.getSignal(),
    dispatcher: ctx.getDispatcher(),
  });
  // Read at once: a body left unread would hold its connection.
  const body = Buffer.from(await res.body.arrayBuffer());
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(res.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return new ResponseContext(res.statusCode, headers, new SelfDecodingBody(Promise.resolve(body)));
}

/** What else may end a request before its deadline: for an activity's, the activity's cancellation. */
export type CallerSignal = () => AbortSignal | undefined;

function withDeadline(
  pool: Connections,
  timeoutMs: number,
  query: Record<string, string>,
  callerSignal: CallerSignal,
): HttpLibrary {
  return wrapHttpLibrary({
    async send(ctx) {
      for (const [name, value] of Object.entries(query)) ctx.setQueryParam(name, value);
      const deadline = AbortSignal.timeout(timeoutMs);
      const caller = callerSignal();
      // Already ended: refused before anything is sent.
      caller?.throwIfAborted();
      ctx.setSignal(caller ? AbortSignal.any([deadline, caller]) : deadline);
      try {
        return await send(ctx);
      } catch (err) {
        if (deadline.aborted) pool.drop();
        if (caller?.aborted) throw caller.reason;
        throw err;
      }
    },
  });
}

function poolOf(kc: KubeConfig): Connections {
  return connections.get(kc) ?? connections.set(kc, new Connections(kc)).get(kc)!;
}

function serverOf(kc: KubeConfig): string {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no current cluster');
  return cluster.server;
}

export interface ClientOptions {
  timeoutMs?: number;
  query?: Record<string, string>;
  callerSignal?: CallerSignal;
}

/**
 * A generated client; `query` is added to each of its requests (a list's shardSelector), and
 * `callerSignal` is asked at each request for a signal that ends it early.
 */
export function apiClient<T>(
  kc: KubeConfig,
  type: new (config: Configuration) => T,
  { timeoutMs = requestTimeoutMs, query = {}, callerSignal = () => undefined }: ClientOptions = {},
): T {
  const pool = poolOf(kc);
  return new type(
    createConfiguration({
      baseServer: new ServerConfiguration(serverOf(kc), {}),
      authMethods: { default: pool.auth },
      httpApi: withDeadline(pool, timeoutMs, query, callerSignal),
    }),
  );
}

/**
 * A GET whose JSON answer is returned as the server wrote it: the generated types drop fields they do
 * not know (an alpha field such as a list's `metadata.shardInfo`).
 */
export async function getJson(kc: KubeConfig, path: string): Promise<{ status: number; body: unknown }> {
  const pool = poolOf(kc);
  const ctx = new RequestContext(`${serverOf(kc)}${path}`, HttpMethod.GET);
  ctx.setHeaderParam('Accept', 'application/json');
  await pool.auth.applySecurityAuthentication(ctx);
  const deadline = AbortSignal.timeout(requestTimeoutMs);
  ctx.setSignal(deadline);
  const res = await send(ctx);
  const text = await res.body.text();
  return { status: res.httpStatusCode, body: text ? JSON.parse(text) : undefined };
}

/** The kubeconfig in `file`, or else in-cluster, then ~/.kube/config. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}
