// Delivers signal requests to Temporal. Requests for the same model coalesce while waiting; when
// Temporal cannot be reached they stay pending and are retried with backoff, so nothing is dropped.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { SignalRequest } from './event-filter.js';
import { mergedVersions } from '../core/watch-echoes.js';

export type Send = (request: SignalRequest) => Promise<void>;

export interface SignalerOptions {
  concurrency: number;
  backoffMs: { initial: number; max: number };
  /**
   * Least time between two deliveries to one model; what comes meanwhile waits and coalesces. A
   * rollout's many status updates then cost a workflow one signal a second, not one each (every
   * signal is a history event and a workflow task), and the workflow starts rounds no faster anyway.
   */
  minIntervalMs?: number;
}

export const defaultSignalerOptions: SignalerOptions = {
  concurrency: 8,
  backoffMs: { initial: 250, max: 30_000 },
  minIntervalMs: 1_000,
};

export function keyOf(r: { namespace: string; name: string }): string {
  return `${r.namespace}/${r.name}`;
}

/**
 * A `reconcile` (which can start a workflow) wins over a `deleted` (which only tells a running one):
 * if both are pending for a name, the object may have been recreated and must not be missed. Two
 * coalesced events are no longer one object's version: the merged hint names every event's version
 * instead, so the workflow takes it for its own echo only when all of them are (src/core/watch-echoes.ts).
 */
export function merge(pending: SignalRequest | undefined, next: SignalRequest): SignalRequest {
  if (!pending) return next;
  const kept = pending.signal === 'reconcile' && next.signal === 'deleted' ? pending : next;
  const { resourceVersion: _merged, versions: _listed, ...hint } = kept.hint;
  const versions = mergedVersions(pending.hint, next.hint);
  return { ...kept, hint: versions ? { ...hint, versions } : hint };
}

export class Signaler {
  private readonly pending = new Map<string, SignalRequest>();
  /** Models whose delivery is under way: a newer request for one waits, so one model never gets two at once. */
  private readonly inFlight = new Set<string>();
  private readonly senders = new Set<Promise<void>>();
  private stopped = false;
  private readonly abort = new AbortController();
  private backoff: number;
  /** After a failed delivery every sender waits until then: Temporal is likely away for all of them. */
  private pausedUntil = 0;
  /** When each model last had a delivery (only while that is within minIntervalMs). */
  private readonly lastSent = new Map<string, number>();
  private wake: { at: number; timer: NodeJS.Timeout } | undefined;
  /** Nothing is sent while held (holdUntil). */
  private held = false;
  sent = 0;
  failures = 0;

  constructor(
    private readonly send: Send,
    private readonly log: Logger,
    private readonly opts: SignalerOptions = defaultSignalerOptions,
  ) {
    this.backoff = opts.backoffMs.initial;
  }

  /** Models with a signal not yet delivered: waiting, or in flight (a send can take seconds to fail). */
  get pendingCount(): number {
    let n = this.pending.size;
    for (const key of this.inFlight) if (!this.pending.has(key)) n++;
    return n;
  }

  /** Drops the pending requests of the namespaces `drop` names (a shard another replica now holds). */
  forget(drop: (namespace: string) => boolean): void {
    for (const [key, request] of this.pending) if (drop(request.namespace)) this.pending.delete(key);
  }

  enqueue(request: SignalRequest): void {
    const key = keyOf(request);
    this.pending.set(key, merge(this.pending.get(key), request));
    this.startSenders();
  }

  /**
   * Sends nothing until `ready` settles, or for `atMostMs`: the requests wait and coalesce. A restarted
   * operator's first signals wait for its queue's workflows to be taken from the dead worker's sticky
   * queue (src/worker/sticky-redirect.ts), or each would wait out that queue's timeout.
   */
  holdUntil(ready: Promise<unknown>, atMostMs = 15_000): void {
    this.held = true;
    void Promise.race([ready, sleep(atMostMs)]).finally(() => {
      this.held = false;
      this.startSenders();
    });
  }

  /** Stops retrying; requests still pending are reported and left to the next start's re-list. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    clearTimeout(this.wake?.timer);
    await this.idle();
    if (this.pending.size)
      this.log.warn({ pending: this.pending.size }, 'stopping with undelivered signals; the next start re-lists them');
  }

  /** Resolves once nothing is pending (or the signaler stopped). */
  async idle(): Promise<void> {
    while (this.senders.size > 0) await Promise.all(this.senders);
  }

  /** Up to `concurrency` senders, each taking the next model not in flight: one slow delivery holds up no other. */
  private startSenders(): void {
    while (!this.stopped && !this.held && this.senders.size < this.opts.concurrency && this.nextKey() !== undefined) {
      const sender: Promise<void> = this.sendUntilEmpty().finally(() => {
        this.senders.delete(sender);
        // A request that waited for its model's delivery in flight may still be pending.
        this.startSenders();
      });
      this.senders.add(sender);
    }
  }

  /** The next model that may have its delivery now; otherwise a wake-up when the soonest may. */
  private nextKey(): string | undefined {
    const now = Date.now();
    const interval = this.opts.minIntervalMs ?? 0;
    let soonest = Infinity;
    for (const key of this.pending.keys()) {
      if (this.inFlight.has(key)) continue;
      const due = (this.lastSent.get(key) ?? -Infinity) + interval;
      if (due <= now) return key;
      soonest = Math.min(soonest, due);
    }
    if (soonest < Infinity) this.wakeAt(soonest);
    return undefined;
  }

  private wakeAt(at: number): void {
    if (this.stopped || (this.wake && this.wake.at <= at)) return;
    clearTimeout(this.wake?.timer);
    const timer = setTimeout(() => {
      this.wake = undefined;
      this.startSenders();
    }, at - Date.now());
    this.wake = { at, timer };
  }

  private delivered(key: string): void {
    if (!this.opts.minIntervalMs) return;
    const now = Date.now();
    this.lastSent.set(key, now);
    if (this.lastSent.size > 10_000) {
      for (const [k, t] of this.lastSent) if (t + this.opts.minIntervalMs <= now) this.lastSent.delete(k);
    }
  }

  private async sendUntilEmpty(): Promise<void> {
    for (;;) {
      const wait = this.pausedUntil - Date.now();
      if (wait > 0) await sleep(wait, undefined, { signal: this.abort.signal }).catch(() => undefined);
      const key = this.nextKey();
      if (key === undefined || this.stopped) return;
      const r = this.pending.get(key)!;
      this.pending.delete(key);
      this.inFlight.add(key);
      try {
        await this.send(r);
        this.delivered(key);
        this.sent++;
        this.backoff = this.opts.backoffMs.initial;
      } catch (err) {
        this.failures++;
        // A newer request that arrived meanwhile supersedes the failed one.
        if (!this.pending.has(key)) this.pending.set(key, r);
        if (this.pausedUntil <= Date.now()) {
          if (this.backoff === this.opts.backoffMs.initial)
            this.log.warn({ err: String(err), key, retryInMs: this.backoff }, 'could not signal workflow; will retry');
          this.pausedUntil = Date.now() + this.backoff;
          this.backoff = Math.min(this.backoff * 2, this.opts.backoffMs.max);
        }
      } finally {
        this.inFlight.delete(key);
      }
    }
  }
}
