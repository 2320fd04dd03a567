// Sharding switched on (--shards): how the apiserver is asked for this replica's shards, then the
// Leases that give them and the placement that follows them (workers, informer scope).
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { TemporalContact } from '../core/shard-assignment.js';
import { shardTaskQueue, type ShardHash } from '../core/shards.js';
import { apiMessage } from '../process/kube-errors.js';
import { leasePrefixFor, ShardLeases } from './shard-leases.js';
import { ShardPlacement, type PlacementParts, type ShardWorker } from './shard-placement.js';
import { apiserverFiltersShards } from './shard-scope.js';

export interface ShardSettings {
  shards: number;
  hash: ShardHash;
  leaseNamespace: string;
  identity: string;
  /** The install's base task queue: the shards' queues and Leases are named after it. */
  taskQueue: string;
  /** The operator's namespaces; empty for all. */
  namespaces: string[];
}

export interface ShardingParts extends Omit<PlacementParts, 'startWorker'> {
  /** Whether lists and watches carry the shards' selector; told before the first placement. */
  serverSide(serverSide: boolean): void;
  startWorker(queue: string): Promise<ShardWorker>;
  /** What this replica's probes of Temporal say (src/core/shard-assignment.ts). */
  contact(): TemporalContact;
}

export interface TakenShards {
  leases: ShardLeases;
  serverSide: boolean;
}

/** Starts taking shards through their Leases; `leases.stop()` lets them go. */
export async function takeShards(
  kc: KubeConfig,
  settings: ShardSettings,
  parts: ShardingParts,
  log: Logger,
): Promise<TakenShards> {
  const { shards, hash, leaseNamespace, identity, taskQueue } = settings;
  const layout = { count: shards, hash };
  const serverSide = await apiserverSelects(kc, settings, log);
  parts.serverSide(serverSide);
  const placement = new ShardPlacement(
    {
      startWorker: (k) => parts.startWorker(shardTaskQueue(taskQueue, k)),
      reshard: (owned) => parts.reshard(owned),
      placed: (held, gained) => parts.placed(held, gained),
      failed: (err) => parts.failed(err),
    },
    log,
  );
  const leases = new ShardLeases(
    kc,
    { namespace: leaseNamespace, identity, layout, prefix: leasePrefixFor(taskQueue), contact: () => parts.contact() },
    (owned) => placement.place(owned),
    log,
  );
  leases.start();
  log.info({ shards, leaseNamespace, identity }, 'taking shards through Leases');
  return { leases, serverSide };
}

/**
 * The selector goes to the apiserver only with its own hash, and only where it is seen to apply it
 * (an alpha field: another version might refuse it); the informer's own filter keeps the same objects
 * either way.
 */
async function apiserverSelects(kc: KubeConfig, settings: ShardSettings, log: Logger): Promise<boolean> {
  const { hash, namespaces } = settings;
  const serverSide =
    hash === 'apiserver' &&
    (await apiserverFiltersShards(kc, namespaces[0]).catch((err: unknown) => {
      log.warn({ err: apiMessage(err) }, 'could not tell whether the apiserver filters shards; filtering here');
      return false;
    }));
  log.info(
    { serverSide, hash },
    serverSide
      ? 'the apiserver sends each replica only its shards (ShardedListAndWatch)'
      : `the apiserver does not filter shards (${hash === 'mixed' ? 'it cannot select on the mixed hash' : 'ShardedListAndWatch is off'}): each replica receives every object and keeps its shards'`,
  );
  return serverSide;
}
