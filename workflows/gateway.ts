// The MachineModel workflow's gateway steps: publish a Ready model's route, and remove it before the
// finalizer goes, for as long as the gateway takes to confirm. Each step is tried first as a local
// activity (a Ready round with a gateway is one workflow task), then as a regular one with the
// gateway's short retry policy.
import type { Activities, ModelSnapshot, WriteStatusInput, WriteStatusResult } from '../activities/index.js';
import type { ModelRef } from '../src/core/api.js';
import { policyOf } from '../src/core/failures.js';
import { gatewayCondition, type GatewayCondition } from '../src/core/route-rules.js';
import type { Verdict } from '../src/core/status.js';
import type { CarriedState } from './definitions.js';
import { failureOf, gatewayStepOptions, localFirstWith, step } from './steps.js';

/** Longest wait between attempts to remove a route while the gateway is away. */
export const gatewayRetryMaxSeconds = 30;

export interface Publication {
  changes: string[];
  condition?: GatewayCondition;
  /** Where the gateway serves the model; null when it does not, undefined to keep what status says. */
  url?: string | null;
  /** The gateway was away: look again within gatewayRetryMaxSeconds rather than at the drift check. */
  retrySoon: boolean;
}

/** What the gateway steps need from the round that runs them. */
export interface GatewayContext {
  state: Pick<CarriedState, 'routeRegistered'>;
  writeStatus(
    ref: ModelRef,
    generation: number,
    verdict: Verdict,
    extra: Partial<WriteStatusInput>,
  ): Promise<WriteStatusResult>;
  /** Sleeps up to `seconds`, or less when a signal asks the workflow to look again. */
  waitForSignal(seconds: number, summary: string): Promise<void>;
}

/** The model's route on the gateway, as its rounds see it: publish it, remove it, forget a previous object's. */
export function modelGateway(ctx: GatewayContext) {
  const { state } = ctx;
  const gatewayStep = <K extends 'registerRoute' | 'unregisterRoute'>(
    name: K,
    summary: string,
    ...args: Parameters<Activities[K]>
  ): ReturnType<Activities[K]> => localFirstWith(gatewayStepOptions, name, summary, ...args);

  /**
   * Removes the model's route, retrying with capped backoff for as long as the gateway is away: the
   * finalizer (if any) stays until the gateway confirms. While the object exists (`generation` given),
   * a condition and an Event say why deletion waits.
   */
  async function removeRoute(ref: ModelRef, generation?: number): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      try {
        const { removed } = await gatewayStep('unregisterRoute', 'remove gateway route', ref);
        state.routeRegistered = false;
        return removed;
      } catch (err) {
        const failure = failureOf(err);
        if (!failure) throw err;
        const message = `the gateway has not confirmed the route's removal (${failure.message}); keeping the finalizer and retrying`;
        if (generation !== undefined) {
          await ctx.writeStatus(
            ref,
            generation,
            { kind: 'deleting', message },
            { extraConditions: [gatewayCondition('Unknown', 'UnregisterPending', message)] },
          );
          if (attempt % 10 === 0) {
            await step('recordModelEvent', 'event: gateway unavailable', ref, 'Warning', 'GatewayUnavailable', message);
          }
        }
        await ctx.waitForSignal(
          Math.min(2 ** attempt * 2, gatewayRetryMaxSeconds),
          'wait for the gateway to come back',
        );
      }
    }
  }

  return {
    /**
     * Registers a Ready model's route; an idempotent check each Ready round keeps it in step with the
     * spec. A gateway outage becomes a condition and an early retry instead of a stuck round.
     */
    async publish(model: ModelSnapshot, canaryShare = 0): Promise<Publication | undefined> {
      if (model.gatewayConfigured === false) return undefined;
      try {
        const summary =
          canaryShare > 0 ? `publish on the gateway, ${canaryShare}% to the canary` : 'publish on the gateway';
        const r = await gatewayStep('registerRoute', summary, model, canaryShare);
        if (!r.configured) return undefined;
        state.routeRegistered = r.registered || state.routeRegistered;
        return { changes: r.changes, condition: r.condition, url: r.url ?? null, retrySoon: false };
      } catch (err) {
        const failure = failureOf(err);
        if (!failure) throw err;
        if (policyOf(failure) !== 'retryable') {
          // Retrying soon cannot help (a permission, a misconfiguration): say so until something changes.
          const reason = failure.type ?? 'GatewayError';
          return { changes: [], condition: gatewayCondition('False', reason, failure.message), retrySoon: false };
        }
        const condition = gatewayCondition('Unknown', 'GatewayUnavailable', `${failure.message}; retrying`);
        return { changes: [], condition, retrySoon: true };
      }
    },

    /** While the object is deleting: removes its route; true when one was there. */
    async unpublish(ref: ModelRef, generation: number): Promise<boolean> {
      return removeRoute(ref, generation);
    },

    /** The object is gone or was replaced: what its route left on the gateway goes, by its own uid. */
    async forget(previous: ModelRef): Promise<void> {
      if (state.routeRegistered) await removeRoute(previous);
    },
  };
}
