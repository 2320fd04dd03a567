// Why a rollout waits for the scheduler, from the pods' PodScheduled conditions. Pure.

/** The fields of a Pod that say whether the scheduler placed it. */
export interface PodView {
  metadata?: { deletionTimestamp?: unknown };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

export interface Unschedulable {
  /** Pods the scheduler could not place. */
  pods: number;
  /** The scheduler's own explanation for one of them, e.g. "0/1 nodes are available: 1 Insufficient nvidia.com/gpu." */
  message: string;
}

export function unschedulablePods(pods: PodView[]): Unschedulable | undefined {
  const stuck = pods.filter(
    (p) =>
      !p.metadata?.deletionTimestamp &&
      p.status?.conditions?.some(
        (c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable',
      ),
  );
  if (stuck.length === 0) return undefined;
  const message = stuck[0]!.status!.conditions!.find((c) => c.type === 'PodScheduled')!.message ?? 'no reason given';
  return { pods: stuck.length, message };
}
