// When the look at the running model workflows (workflow-sweep.ts) runs: when asked (after the
// informer's first list, after each change of this replica's shards) and every 10 minutes, so that a
// move someone else sent (anyone who reaches Temporal can) is undone, and a model whose deletion no
// watch saw is told, without waiting for a change of shards. In the background: a visibility query
// need not hold the informer's readiness. One look at a time; those asked for meanwhile are one look
// after it.
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Reachability } from '../process/ready-gate.js';
import { untilTemporalAnswers } from '../process/temporal.js';
import { sweepModelWorkflows, type WorkflowSweep } from './workflow-sweep.js';

const resweepEveryMs = 600_000;

export interface SweepSettings {
  client: Client;
  sweep: WorkflowSweep;
  temporal: Reachability;
  /** Aborted when the operator stops: no look is asked for or waited for any more. */
  signal: AbortSignal;
  log: Logger;
  /** Unpolled queues where workflows still run: drained (src/sharding/queue-drains.ts), if moves are made here. */
  drain?: (queues: string[]) => Promise<void>;
}

export class SweepSchedule {
  private sweeping: Promise<void> | undefined;
  private again = false;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly settings: SweepSettings) {
    this.timer = setInterval(() => this.sweep(), resweepEveryMs);
    this.timer.unref();
  }

  /** Looks now, or once more after the look under way. */
  sweep(): void {
    if (this.sweeping) {
      this.again = true;
      return;
    }
    this.sweeping = this.look().finally(() => {
      this.sweeping = undefined;
      if (this.again && !this.settings.signal.aborted) {
        this.again = false;
        this.sweep();
      }
    });
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private look(): Promise<void> {
    const { client, sweep, temporal, signal, log, drain } = this.settings;
    return untilTemporalAnswers(() => sweepModelWorkflows(client, sweep), temporal, signal).then(
      ({ vanished, moved, failed, stranded }) => {
        (failed ? log.warn : log.info).call(
          log,
          { vanished, moved, failed, stranded },
          'told the workflows of models deleted while no informer watched, and those on another queue than their own',
        );
        return drain?.(stranded);
      },
      () => undefined,
    );
  }
}
