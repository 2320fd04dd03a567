// Models deleted with their namespace, when the operator runs without a gateway. Their workflows have
// nothing left to do but end: nothing lies outside the namespace (no route: with a gateway, a model
// whose finalizer was removed by hand must lose its route at once, so nothing is held), and no object
// can be created again in a namespace being deleted. Each told workflow still takes a workflow task,
// and a cold one replays its whole history, on the cores the namespace's own deletion needs: told at
// once, they doubled a deletion of 1,000 models (docs/performance.md, "Deletion"). So their `deleted`
// signals wait here until no namespace deletion that concerns models is under way any more (told as
// each namespace went, they still slowed the namespaces deleted beside it), or at most holdLimitMs
// from the namespace's first. The lane looks when a namespace goes and every recheckMs meanwhile (a
// reshard or a relist brings no deletion event).
// A lost shard's are dropped, and so is everything when the process ends: the sweep of vanished
// models that the shard's next owner runs (or the next start's) tells them.
import type { SignalRequest } from './event-filter.js';
import { keyOf } from './signaler.js';

export interface DeletionLaneOptions {
  /** The longest a namespace's deletions wait, from the first held one. */
  holdLimitMs: number;
  /** How often the lane looks again while it holds anything. */
  recheckMs: number;
}

const deletionLaneDefaults: DeletionLaneOptions = { holdLimitMs: 300_000, recheckMs: 10_000 };

interface Held {
  requests: Map<string, SignalRequest>;
  timer: NodeJS.Timeout;
  /** When the last of them was held (Date.now()). */
  lastAt: number;
}

export class DeletionLane {
  private readonly held = new Map<string, Held>();
  private recheck: NodeJS.Timeout | undefined;
  /** Deletions passed on: no namespace deletion with models under way, or the hold limit. */
  released = 0;

  /** `underWay`: whether a namespace deletion that concerns models is still under way (src/core/namespace-deletion.ts). */
  constructor(
    private readonly forward: (request: SignalRequest) => void,
    private readonly underWay: () => boolean,
    private readonly opts: DeletionLaneOptions = deletionLaneDefaults,
  ) {}

  /** Milliseconds since the lane last held a deletion of this namespace's models; undefined: it holds none. */
  sinceLastHeld(namespace: string): number | undefined {
    const held = this.held.get(namespace);
    return held && Date.now() - held.lastAt;
  }

  get heldCount(): number {
    let n = 0;
    for (const { requests } of this.held.values()) n += requests.size;
    return n;
  }

  /** A model's deletion in a namespace being deleted: told when no namespace deletion with models is under way. */
  hold(request: SignalRequest): void {
    let held = this.held.get(request.namespace);
    if (!held) {
      const timer = setTimeout(() => this.release(request.namespace), this.opts.holdLimitMs);
      timer.unref();
      held = { requests: new Map(), timer, lastAt: 0 };
      this.held.set(request.namespace, held);
    }
    held.requests.set(keyOf(request), request);
    held.lastAt = Date.now();
    if (!this.recheck) {
      this.recheck = setInterval(() => this.look(), this.opts.recheckMs);
      this.recheck.unref();
    }
  }

  /** Tells every held deletion once no namespace deletion that concerns models is under way. */
  look(): void {
    if (this.held.size > 0 && !this.underWay()) for (const namespace of [...this.held.keys()]) this.release(namespace);
  }

  /** The namespace's hold limit passed, or see above: its models' workflows are told now. */
  private release(namespace: string): void {
    const held = this.drop(namespace);
    for (const request of held?.requests.values() ?? []) {
      this.released++;
      this.forward(request);
    }
  }

  /** A lost shard's namespaces: its next owner's sweep of vanished models tells their workflows. */
  forget(lost: (namespace: string) => boolean): void {
    for (const namespace of [...this.held.keys()]) if (lost(namespace)) this.drop(namespace);
  }

  /** Drops everything: the signaler stops too, and the next start's sweep tells them. */
  stop(): void {
    this.forget(() => true);
  }

  private drop(namespace: string): Held | undefined {
    const held = this.held.get(namespace);
    if (!held) return undefined;
    clearTimeout(held.timer);
    this.held.delete(namespace);
    if (this.held.size === 0) this.stopLooking();
    return held;
  }

  private stopLooking(): void {
    clearInterval(this.recheck);
    this.recheck = undefined;
  }
}
