// When each object of a run reached each milestone, from watches (no polling load on the apiserver):
// its Deployment created, its Deployment available, and the contender's own object converged.
import { KubeConfig, KubernetesObjectApi, ListWatch, Watch, type KubernetesObject } from '@kubernetes/client-node';

export interface Watched {
  apiVersion: string;
  kind: string;
  /** Collection path without the namespace part, e.g. /apis/apps/v1 + deployments. */
  prefix: string;
  resource: string;
}

type Obj = KubernetesObject & { status?: Record<string, any> };

export const deployments: Watched = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  prefix: '/apis/apps/v1',
  resource: 'deployments',
};

const available = (d: Obj) =>
  (d.status?.conditions as { type: string; status: string }[] | undefined)?.some(
    (c) => c.type === 'Available' && c.status === 'True',
  ) ?? false;

export class Timeline {
  readonly created = new Map<string, number>();
  readonly available = new Map<string, number>();
  readonly converged = new Map<string, number>();
  /** The contender's own objects that exist now (a deletion empties it). */
  private readonly ownLive = new Set<string>();
  /** performance.now() when a deletion seen by the watch left none of the contender's own objects. */
  ownGoneAt: number | undefined;
  private readonly watches: ListWatch<Obj>[] = [];
  private t0 = performance.now();
  /** Date.now() when the timeline began: its times plus this are epoch milliseconds. */
  epochMs = Date.now();

  constructor(
    private readonly kc: KubeConfig,
    /** The run's namespaces; object names are unique across them. */
    private readonly namespaces: string[],
    private readonly own: { watched: Watched; converged: (o: Obj) => boolean } | undefined,
  ) {}

  private watch(w: Watched, onObject: (o: Obj) => void, onDelete?: (o: Obj) => void): void {
    const api = this.kc.makeApiClient(KubernetesObjectApi);
    for (const namespace of this.namespaces) {
      const path = `${w.prefix}/namespaces/${namespace}/${w.resource}`;
      const list = () => api.list(w.apiVersion, w.kind, namespace) as never;
      const lw = new ListWatch<Obj>(path, new Watch(this.kc), list, false);
      lw.on('add', onObject);
      lw.on('update', onObject);
      if (onDelete) lw.on('delete', onDelete);
      lw.on('error', () => setTimeout(() => void lw.start(), 1_000));
      this.watches.push(lw);
    }
  }

  /** Milliseconds since the timeline began. */
  private now(): number {
    return performance.now() - this.t0;
  }

  async start(): Promise<void> {
    const mark = (m: Map<string, number>, name: string) => m.has(name) || m.set(name, this.now());
    this.watch(deployments, (d) => {
      mark(this.created, d.metadata!.name!);
      if (available(d)) mark(this.available, d.metadata!.name!);
    });
    const own = this.own;
    if (own)
      this.watch(
        own.watched,
        (o) => {
          this.ownLive.add(o.metadata!.name!);
          if (own.converged(o)) mark(this.converged, o.metadata!.name!);
        },
        (o) => {
          this.ownLive.delete(o.metadata!.name!);
          if (this.ownLive.size === 0) this.ownGoneAt = performance.now();
        },
      );
    await Promise.all(this.watches.map((w) => w.start()));
  }

  /** From now on times count: call it just before the objects are applied. */
  begin(): void {
    this.t0 = performance.now();
    this.epochMs = Date.now();
  }

  /** Converged objects: the contender's own, or (without one) the available Deployments. */
  get done(): Map<string, number> {
    return this.own ? this.converged : this.available;
  }

  async stop(): Promise<void> {
    await Promise.all(this.watches.map((w) => w.stop()));
  }
}
