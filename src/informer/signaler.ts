// Delivers signal requests to Temporal. Requests for the same model coalesce while waiting; when
// Temporal cannot be reached they stay pending and are retried with backoff, so nothing is dropped.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { SignalRequest } from './event-filter.js';

export type Send = (request: SignalRequest) => Promise<void>;

export interface SignalerOptions {
  concurrency: number;
  backoffMs: { initial: number; max: number };
}

export const defaultSignalerOptions: SignalerOptions = { concurrency: 8, backoffMs: { initial: 250, max: 30_000 } };

function keyOf(r: SignalRequest): string {
  return `${r.namespace}/${r.name}`;
}

/**
 * A `reconcile` (which can start a workflow) wins over a `deleted` (which only tells a running one):
 * if both are pending for a name, the object may have been recreated and must not be missed. Two
 * coalesced events are no longer one object's version: the merged hint has no resourceVersion, so
 * the workflow cannot take it for the echo of its own write and miss the other event.
 */
export function merge(pending: SignalRequest | undefined, next: SignalRequest): SignalRequest {
  if (!pending) return next;
  const kept = pending.signal === 'reconcile' && next.signal === 'deleted' ? pending : next;
  const { resourceVersion: _merged, ...hint } = kept.hint;
  return { ...kept, hint };
}

export class Signaler {
  private readonly pending = new Map<string, SignalRequest>();
  private draining: Promise<void> | undefined;
  private stopped = false;
  private readonly abort = new AbortController();
  private backoff: number;
  sent = 0;
  failures = 0;

  constructor(
    private readonly send: Send,
    private readonly log: Logger,
    private readonly opts: SignalerOptions = defaultSignalerOptions,
  ) {
    this.backoff = opts.backoffMs.initial;
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  enqueue(request: SignalRequest): void {
    const key = keyOf(request);
    this.pending.set(key, merge(this.pending.get(key), request));
    this.draining ??= this.drain().finally(() => {
      this.draining = undefined;
    });
  }

  /** Stops retrying; requests still pending are reported and left to the next start's re-list. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.draining;
    if (this.pending.size)
      this.log.warn({ pending: this.pending.size }, 'stopping with undelivered signals; the next start re-lists them');
  }

  /** Resolves once nothing is pending (or the signaler stopped). */
  async idle(): Promise<void> {
    while (this.draining) await this.draining;
  }

  private async drain(): Promise<void> {
    while (this.pending.size > 0 && !this.stopped) {
      const batch = [...this.pending.values()].slice(0, this.opts.concurrency);
      for (const r of batch) this.pending.delete(keyOf(r));
      const results = await Promise.allSettled(batch.map((r) => this.send(r)));
      let failed = 0;
      results.forEach((res, i) => {
        const r = batch[i]!;
        if (res.status === 'fulfilled') {
          this.sent++;
          return;
        }
        failed++;
        // A newer request that arrived meanwhile supersedes the failed one.
        if (!this.pending.has(keyOf(r))) this.pending.set(keyOf(r), r);
        if (failed === 1)
          this.log.warn(
            { err: String(res.reason), key: keyOf(r), retryInMs: this.backoff },
            'could not signal workflow; will retry',
          );
      });
      this.failures += failed;
      if (failed > 0) {
        await sleep(this.backoff, undefined, { signal: this.abort.signal }).catch(() => undefined);
        this.backoff = Math.min(this.backoff * 2, this.opts.backoffMs.max);
      } else {
        this.backoff = this.opts.backoffMs.initial;
      }
    }
  }
}
