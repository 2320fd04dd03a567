// Starts the workflows of new models a bounded number at a time. Ten thousand models applied at once
// would otherwise start ten thousand workflows together: their tasks interleave so that the worker's
// cache evicts each workflow before its next task (every miss replays a whole history), every new
// model's first task queues behind the rest, and the operator's writes crowd out the user's own
// apply. A model waits here only until its turn; its requests coalesce meanwhile, and nothing is
// dropped: the gate keeps no state the next start's list cannot rebuild.
import {
  awaitsFirstRound,
  settled,
  startBound,
  startGateDefaults,
  type ArrivalBurst,
  type FirstRoundView,
} from '../core/first-round.js';
import { modelKeyOf, type SignalRequest, type WatchedObject, type WatchEventType } from './event-filter.js';
import { keyOf, merge } from './signaler.js';

export interface StartGateOptions {
  /** New models whose workflows may be starting at once; 0: no bound. */
  maxStarting: number;
  /** A started model that has not settled by then frees its place anyway. */
  holdLimitMs: number;
  /** The smaller bound while a bulk apply is still arriving; none when absent. */
  burst?: ArrivalBurst;
}

export class StartGate {
  /** New models in the order they were seen, with their coalesced request once one came. */
  private readonly waiting = new Map<string, SignalRequest | undefined>();
  /** Models let through, until they settle or their hold limit passes. */
  private readonly starting = new Map<string, number>();
  /** When new models were first seen, within the burst's window (ascending). */
  private readonly arrivals: number[] = [];
  private timer: NodeJS.Timeout | undefined;
  started = 0;
  /** Models that freed their place at the hold limit instead of settling. */
  expired = 0;

  constructor(
    private readonly forward: (request: SignalRequest) => void,
    private readonly opts: StartGateOptions = startGateDefaults,
    private readonly now: () => number = Date.now,
  ) {}

  get waitingCount(): number {
    return this.waiting.size;
  }

  get startingCount(): number {
    return this.starting.size;
  }

  /** What the MachineModel watch says of a model: new ones wait their turn, settled ones free theirs. */
  observe(type: WatchEventType, model: WatchedObject & FirstRoundView): void {
    const m = modelKeyOf('MachineModel', model);
    if (this.opts.maxStarting === 0 || !m) return;
    const key = keyOf(m);
    if (type === 'deleted') {
      // Its deletion request follows through `offer`; what it held was for an object now gone.
      this.waiting.delete(key);
      if (this.starting.delete(key)) this.pump();
      return;
    }
    if (awaitsFirstRound(model)) {
      if (!this.starting.has(key) && !this.waiting.has(key)) {
        this.waiting.set(key, undefined);
        this.arrived();
      }
      return;
    }
    // Started by another replica, or being deleted: it need not wait.
    const held = this.waiting.get(key);
    if (this.waiting.delete(key) && held) this.forward(held);
    if (this.starting.has(key) && settled(model)) {
      this.starting.delete(key);
      this.pump();
    }
  }

  /** A signal request: held while its model waits its turn, passed on otherwise. */
  offer(request: SignalRequest): void {
    const key = keyOf(request);
    if (!this.waiting.has(key)) return this.forward(request);
    this.waiting.set(key, merge(this.waiting.get(key), request));
    this.pump();
  }

  /** Lets go of the models of the namespaces `drop` names (their shard's new owner starts them). */
  forget(drop: (namespace: string) => boolean): void {
    const dropped = (key: string) => drop(key.slice(0, key.indexOf('/')));
    for (const key of this.waiting.keys()) if (dropped(key)) this.waiting.delete(key);
    for (const key of this.starting.keys()) if (dropped(key)) this.starting.delete(key);
    this.pump();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arrived(): void {
    const { burst } = this.opts;
    if (!burst) return;
    const now = this.now();
    while (this.arrivals.length > 0 && this.arrivals[0]! <= now - burst.windowMs) this.arrivals.shift();
    this.arrivals.push(now);
  }

  private pump(): void {
    const now = this.now();
    for (const [key, deadline] of this.starting)
      if (deadline <= now) {
        this.starting.delete(key);
        this.expired++;
      }
    const { bound, until } = this.opts.burst
      ? startBound(this.opts.maxStarting, this.opts.burst, this.arrivals, now)
      : { bound: this.opts.maxStarting };
    for (const [key, held] of this.waiting) {
      if (this.starting.size >= bound) break;
      if (!held) continue;
      this.waiting.delete(key);
      this.starting.set(key, now + this.opts.holdLimitMs);
      this.started++;
      this.forward(held);
    }
    this.wakeForNextPlace(bound, until);
  }

  /**
   * With models waiting and every place taken, a place frees at the earliest hold limit, or more
   * places open when the burst's bound ends.
   */
  private wakeForNextPlace(bound: number, burstEnds: number | undefined): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.waiting.size === 0 || this.starting.size < bound) return;
    const next = Math.min(...this.starting.values(), burstEnds ?? Infinity);
    this.timer = setTimeout(() => this.pump(), Math.max(0, next - this.now()));
    this.timer.unref();
  }
}
