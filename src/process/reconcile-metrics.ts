// Metrics of the worker's reconcile work: rounds (from the workflow's sink), activity attempts and
// gateway calls (from an activity interceptor). They land in the operator's own /metrics registry.
// The interceptor also puts the model's namespace/name on every line an activity logs.
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory, InjectedSinks } from '@temporalio/worker';
import { Counter, Histogram, type Registry } from 'prom-client';
import { modelOfWorkflowId } from '../core/api.js';
import type { RoundMetricsSink, RoundResult } from '../core/round-result.js';

const gatewayActivities = new Set([
  'registerRoute',
  'unregisterRoute',
  'inspectGateway',
  'removeOrphanRoute',
  'removeCollidingRoute',
]);

type AttemptResult = 'ok' | 'retryable' | 'terminal';

function resultOf(err: unknown): AttemptResult {
  return err instanceof ApplicationFailure && err.nonRetryable ? 'terminal' : 'retryable';
}

/** A step may hand a terminal failure back in its result (readAndApply's `refused`): it counts as one. */
function resultOfValue(value: unknown): AttemptResult {
  return typeof value === 'object' && value !== null && (value as { refused?: unknown }).refused ? 'terminal' : 'ok';
}

export class ReconcileMetrics {
  private readonly rounds: Counter<'result'>;
  private readonly roundSeconds: Histogram<'result'>;
  private readonly attempts: Counter<'activity' | 'local' | 'result'>;
  private readonly gatewayCalls: Counter<'call' | 'result'>;
  private readonly rollouts: Counter<'outcome'>;
  private readonly rolloutSeconds: Histogram<'outcome'>;
  /** Wall-clock start of the round in progress, by workflow run. */
  private readonly started = new Map<string, number>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.rounds = new Counter({
      name: 'machinemodel_operator_reconcile_rounds_total',
      help: 'Reconcile rounds, by how they ended: ready, progressing, failed, deleting, finished, requeued',
      labelNames: ['result'],
      registers,
    });
    this.roundSeconds = new Histogram({
      name: 'machinemodel_operator_reconcile_round_duration_seconds',
      help: 'Wall-clock time of a reconcile round in this worker, from its first step to its outcome',
      labelNames: ['result'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.attempts = new Counter({
      name: 'machinemodel_operator_activity_attempts_total',
      help: 'Activity attempts run by this worker, by activity type, local or not, and result (ok, retryable, terminal; a refusal a step returns counts as terminal)',
      labelNames: ['activity', 'local', 'result'],
      registers,
    });
    this.gatewayCalls = new Counter({
      name: 'machinemodel_operator_gateway_calls_total',
      help: 'Calls to the API gateway, by step and result (ok, retryable, terminal)',
      labelNames: ['call', 'result'],
      registers,
    });
    this.rollouts = new Counter({
      name: 'machinemodel_operator_rollouts_total',
      help: 'Canary rollouts that ended, by outcome: Promoted, RolledBack, Aborted, Cancelled (a newer revision, or the model deleted)',
      labelNames: ['outcome'],
      registers,
    });
    this.rolloutSeconds = new Histogram({
      name: 'machinemodel_operator_rollout_duration_seconds',
      help: 'How long canary rollouts ran, from their start to their end, by outcome',
      labelNames: ['outcome'],
      buckets: [10, 60, 300, 900, 1800, 3600, 7200, 21600, 86400],
      registers,
    });
  }

  /** The workflow's sink. Not called on replay, so a round counts once however often it is replayed. */
  sinks(): InjectedSinks<{ metrics: RoundMetricsSink }> {
    return {
      metrics: {
        roundStarted: {
          fn: (info) => void this.started.set(info.runId, performance.now()),
          callDuringReplay: false,
        },
        roundFinished: {
          fn: (info, result: RoundResult) => {
            this.rounds.inc({ result });
            const start = this.started.get(info.runId);
            this.started.delete(info.runId);
            // A round begun before this worker took the workflow over has no start here.
            if (start !== undefined) this.roundSeconds.observe({ result }, (performance.now() - start) / 1000);
          },
          callDuringReplay: false,
        },
        rolloutEnded: {
          fn: (_info, outcome: string, seconds: number) => {
            this.rollouts.inc({ outcome });
            this.rolloutSeconds.observe({ outcome }, seconds);
          },
          callDuringReplay: false,
        },
      },
    };
  }

  /** Counts every activity attempt and gateway call by result; names the model in the activity's logs. */
  activityInterceptor(): ActivityInterceptorsFactory {
    return (ctx) => ({
      outbound: {
        getLogAttributes: (input, next) => {
          const model = modelOfWorkflowId(ctx.info.workflowExecution?.workflowId ?? '');
          return next(model ? { ...input, model } : input);
        },
      },
      inbound: {
        execute: async (input, next) => {
          const activity = ctx.info.activityType;
          const count = (result: AttemptResult) => {
            this.attempts.inc({ activity, local: String(ctx.info.isLocal), result });
            if (gatewayActivities.has(activity)) this.gatewayCalls.inc({ call: activity, result });
          };
          try {
            const value = await next(input);
            count(resultOfValue(value));
            return value;
          } catch (err) {
            count(resultOf(err));
            throw err;
          }
        },
      },
    });
  }
}
