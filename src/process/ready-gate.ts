// What the process still waits for before it can do its work; /readyz is 200 only when nothing.
import type { Logger } from 'pino';

export class ReadyGate {
  private readonly waiting = new Map<string, string>();

  /** `part` cannot work yet, for `reason` (shown by /readyz). */
  waitFor(part: string, reason: string): void {
    this.waiting.set(part, reason);
  }

  ready(part: string): void {
    this.waiting.delete(part);
  }

  /** Why the process is not ready; empty when it is. */
  get reasons(): string[] {
    return [...this.waiting.values()];
  }
}

/**
 * Whether a dependency (Temporal, the Kubernetes API) answers, reported by whoever calls it. The first
 * failure after success (or at start) is one warning, the recovery one info line; retries in between
 * only update the reason /readyz shows, so an outage does not flood the log.
 */
export class Reachability {
  private state: 'unknown' | 'up' | 'down' = 'unknown';
  private downSince = 0;

  constructor(
    private readonly part: string,
    private readonly what: string,
    private readonly gate: ReadyGate,
    private readonly log: Logger,
    initially = `${what}: not contacted yet`,
  ) {
    gate.waitFor(part, initially);
  }

  up(): void {
    if (this.state === 'down') {
      this.log.info(`${this.what} answers (after ${((Date.now() - this.downSince) / 1000).toFixed(1)}s)`);
    }
    this.state = 'up';
    this.gate.ready(this.part);
  }

  down(reason: string): void {
    if (this.state !== 'down') {
      this.downSince = Date.now();
      this.log.warn(`${this.what}: ${reason}; waiting for it (not ready until it answers)`);
    } else {
      this.log.debug({ reason }, `${this.what} still does not answer`);
    }
    this.state = 'down';
    this.gate.waitFor(this.part, `${this.what}: ${reason}`);
  }
}
