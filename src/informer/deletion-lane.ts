// Models deleted with their namespace. Their workflows have nothing left to do but end: no finalizer
// held the model (with one, its cleanup round ran before it went), no object can be created again in a
// namespace being deleted, and nothing outside the namespace waits. Each told workflow still takes a
// workflow task, and a cold one replays its whole history, on the cores the namespace's own deletion
// needs: told at once, they doubled a deletion of 1,000 models (docs/performance.md, "Deletion"). So
// their `deleted` signals wait here until the namespace is gone, or at most holdLimitMs. Nothing is
// lost when the process ends meanwhile: the next informer's sweep of vanished models tells them.
import type { SignalRequest } from './event-filter.js';
import { keyOf } from './signaler.js';

export interface DeletionLaneOptions {
  /** The longest a namespace's deletions wait, from the first held one. */
  holdLimitMs: number;
}

export const deletionLaneDefaults: DeletionLaneOptions = { holdLimitMs: 120_000 };

interface Held {
  requests: Map<string, SignalRequest>;
  timer: NodeJS.Timeout;
}

export class DeletionLane {
  private readonly held = new Map<string, Held>();
  /** Deletions passed on, at the namespace's end or its hold limit. */
  released = 0;

  constructor(
    private readonly forward: (request: SignalRequest) => void,
    private readonly opts: DeletionLaneOptions = deletionLaneDefaults,
  ) {}

  get heldCount(): number {
    let n = 0;
    for (const { requests } of this.held.values()) n += requests.size;
    return n;
  }

  /** A model's deletion in a namespace being deleted: told when the namespace is gone. */
  hold(request: SignalRequest): void {
    let held = this.held.get(request.namespace);
    if (!held) {
      const timer = setTimeout(() => this.release(request.namespace), this.opts.holdLimitMs);
      timer.unref();
      held = { requests: new Map(), timer };
      this.held.set(request.namespace, held);
    }
    held.requests.set(keyOf(request), request);
  }

  /** The namespace is gone (or its hold limit passed): its models' workflows are told now. */
  release(namespace: string): void {
    const held = this.held.get(namespace);
    if (!held) return;
    clearTimeout(held.timer);
    this.held.delete(namespace);
    for (const request of held.requests.values()) {
      this.released++;
      this.forward(request);
    }
  }

  /** Drops what the namespaces `drop` names held: their shard's new owner tells them (its sweep). */
  forget(drop: (namespace: string) => boolean): void {
    for (const [namespace, held] of this.held)
      if (drop(namespace)) {
        clearTimeout(held.timer);
        this.held.delete(namespace);
      }
  }

  stop(): void {
    this.forget(() => true);
  }
}
