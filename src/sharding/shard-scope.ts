// Which objects an informer keeps: every one, or those of the namespaces in the shards its replica
// holds. With the 'apiserver' hash the apiserver filters too when it offers sharded list and watch
// (KEP-5866); the client-side check stays either way, so that a server without the feature (or with the gate off, which ignores
// the selector) changes how much is sent, never what is kept.
import type { KubeConfig } from '@kubernetes/client-node';
import { shardOf, shardSelector, type ShardLayout } from '../core/shards.js';
import { getJson } from '../process/kube-api.js';

export interface Shards extends ShardLayout {
  owned: readonly number[];
}

export class ShardScope {
  /** The list and watch `shardSelector`; empty when every namespace is kept. */
  readonly selector: string;
  private readonly owned: ReadonlySet<number>;
  private readonly memo = new Map<string, boolean>();

  /**
   * `serverSide`: send the selector (where the apiserver applies it; only the 'apiserver' hash has
   * one); the filter applies either way.
   */
  constructor(
    readonly shards?: Shards,
    serverSide = true,
  ) {
    this.owned = new Set(shards?.owned ?? []);
    this.selector = shards?.hash === 'apiserver' && serverSide ? shardSelector(this.owned, shards.count) : '';
  }

  /** No shard held: nothing to list or watch. */
  get empty(): boolean {
    return !!this.shards && this.owned.size === 0;
  }

  keeps(namespace: string): boolean {
    if (!this.shards) return true;
    let kept = this.memo.get(namespace);
    if (kept === undefined) {
      kept = this.owned.has(shardOf(namespace, this.shards));
      this.memo.set(namespace, kept);
    }
    return kept;
  }

  sameAs(other: ShardScope): boolean {
    if (!this.shards || !other.shards) return !this.shards && !other.shards;
    return (
      this.shards.count === other.shards.count &&
      this.shards.hash === other.shards.hash &&
      this.owned.size === other.owned.size &&
      [...this.owned].every((k) => other.owned.has(k))
    );
  }
}

/**
 * Whether the apiserver applies a shard selector: a list it filtered echoes the selector in
 * `metadata.shardInfo`; one without the feature (or with its gate off) ignores the parameter. Asked
 * once, of Deployments (a custom resource's list filters alike but has no field for the echo; in
 * `namespace` when the operator watches only some), for the metrics and the log: the client-side
 * filter keeps the same objects either way.
 */
export async function apiserverFiltersShards(kc: KubeConfig, namespace?: string): Promise<boolean> {
  const collection = `/apis/apps/v1${namespace ? `/namespaces/${namespace}` : ''}/deployments`;
  const selector = shardSelector([0], 2);
  const { status, body } = await getJson(kc, `${collection}?limit=1&shardSelector=${encodeURIComponent(selector)}`);
  if (status !== 200) throw new Error(`listing ${collection} answered HTTP ${status}`);
  return !!(body as { metadata?: { shardInfo?: unknown } } | undefined)?.metadata?.shardInfo;
}
