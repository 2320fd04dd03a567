// Temporal unreachable for a while (every connection reset and refused by a TCP proxy in front of the
// real dev server): the informer keeps what it must signal, the worker waits, and once Temporal is
// back everything that changed meanwhile is reconciled. Nothing is dropped, nothing restarts.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { operatorBehindProxy } from '../support/operator-behind-proxy.js';
import { machineModel } from '../support/models.js';
import type { StackInfo } from '../../tools/local-stack/stack.js';

/** The scenarios, against the stack given (its own Temporal, behind a TCP proxy that cuts the network). */
export function temporalOutage(stack: StackInfo): void {
  const k = kubectlFor(stack);
  const cut = operatorBehindProxy(stack, 'temporal', 'temporal-outage');
  const { ready, metric } = cut;

  describe('the operator while Temporal is unreachable', () => {
    it('keeps every change to signal, and reconciles them all when Temporal returns', async () => {
      k.apply(machineModel(cut.ns, 'steady'));
      await ready('steady');

      cut.proxy.reset();
      k.apply([machineModel(cut.ns, 'new-1'), machineModel(cut.ns, 'new-2')]);
      k.kubectl(
        '-n',
        cut.ns,
        'patch',
        'mm',
        'steady',
        '--type=merge',
        '-p',
        '{"spec":{"minReplicas":2,"maxReplicas":2}}',
      );
      const pending = await eventually('three models waiting to be signalled', async () =>
        (await metric('machinemodel_operator_signals_pending')) >= 3 ? true : undefined,
      );
      expect(pending).toBe(true);
      // A delivery to an unreachable Temporal takes seconds to fail (the client retries): wait for one.
      await eventually('a failed delivery counted', async () =>
        (await metric('machinemodel_operator_signal_failures_total')) > 0 ? true : undefined,
      );
      await sleep(5_000);
      // Nothing reconciled while Temporal was away.
      expect(k.phaseOf(cut.ns, 'new-1')).toBeUndefined();
      expect(cut.operator.child.exitCode).toBeNull();
      cut.proxy.heal();
      const healed = Date.now();

      await ready('new-1');
      await ready('new-2');
      await eventually('steady scaled to 2', () =>
        k.get('deployment', cut.ns, 'steady')?.spec.replicas === 2 ? true : undefined,
      );
      await eventually('no signal left pending', async () =>
        (await metric('machinemodel_operator_signals_pending')) === 0 ? true : undefined,
      );
      console.log(`Temporal outage: all three changes reconciled ${Date.now() - healed}ms after Temporal returned`);
    }, 150_000);

    it('notices connections to Temporal that went silent, and carries on', async () => {
      k.apply(machineModel(cut.ns, 'before-silence'));
      await ready('before-silence');
      // The open connections are dead from here on, without a reset or a close.
      cut.proxy.silence();
      await sleep(3_000);
      cut.proxy.heal();
      const healed = Date.now();
      k.apply(machineModel(cut.ns, 'after-silence'));
      await ready('after-silence', 150_000);
      console.log(`silent Temporal connections: a new model Ready ${Date.now() - healed}ms after the network healed`);
    }, 200_000);

    it('still shuts down gracefully afterwards', async () => {
      expect(await cut.operator.stop()).toBe(0);
    }, 60_000);
  });
}
