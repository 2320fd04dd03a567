// How a reconcile round ended, in the few words its metrics count. Pure.
import type { Phase } from './api.js';

export type RoundResult = 'ready' | 'progressing' | 'failed' | 'deleting' | 'finished' | 'requeued';

/** A round that asked to look again soon for a passing reason (requeue) counts apart from its phase. */
export function roundResultOf(round: { finished: boolean; phase?: Phase; requeued?: boolean }): RoundResult {
  if (round.finished) return 'finished';
  if (round.requeued) return 'requeued';
  switch (round.phase) {
    case 'Ready':
      return 'ready';
    case 'Failed':
      return 'failed';
    case 'Deleting':
      return 'deleting';
    default:
      return 'progressing';
  }
}

/** What the workflows tell the worker process about their rounds and rollouts (a Temporal sink: never called on replay). */
export type RoundMetricsSink = {
  roundStarted(): void;
  roundFinished(result: RoundResult): void;
  /** A canary rollout ended (Promoted, RolledBack, Aborted, Cancelled) after `seconds` of workflow time. */
  rolloutEnded(outcome: string, seconds: number): void;
};
