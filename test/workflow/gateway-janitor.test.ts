import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { workflowIdFor } from '../../src/core/api.js';
import { routeId } from '../../src/core/route-rules.js';
import {
  janitorSweepSignal,
  stateQuery,
  type JanitorInput,
  type MachineModelWorkflowInput,
} from '../../workflows/definitions.js';
import { eventually } from '../support/eventually.js';
import { FakeCluster } from '../support/fake-cluster.js';
import { useWorkflowTestEnv } from '../support/workflow-env.js';

const wf = useWorkflowTestEnv();

function startJanitor(taskQueue: string, input: JanitorInput) {
  return wf.env.client.workflow.start('gatewayJanitorWorkflow', {
    taskQueue,
    workflowId: `janitor-${randomUUID()}`,
    args: [input],
  });
}

/** The model workflow the janitor wakes: the real one, under the ID the janitor signals. */
function startModel(taskQueue: string, namespace: string) {
  const input: MachineModelWorkflowInput = { namespace, name: 'm' };
  return wf.env.client.workflow.start('machineModelWorkflow', {
    taskQueue,
    workflowId: workflowIdFor(namespace, 'm'),
    args: [input],
  });
}

describe('gatewayJanitorWorkflow', () => {
  it('removes orphans, withdraws collision losers and wakes their models and the unpublished ones', async () => {
    const cluster = new FakeCluster();
    cluster.ready = true;
    const namespace = `ns-${randomUUID().slice(0, 8)}`;
    const loser = { namespace, name: 'm', uid: 'uid-1' };
    const orphan = { namespace, name: 'gone', uid: 'uid-9' };
    await wf.withWorker(cluster, async (tq) => {
      const model = await startModel(tq, namespace);
      await eventually('the model Ready', async () => (await model.query(stateQuery)).phase === 'Ready');
      const signalsBefore = (await model.query(stateQuery)).signals;
      cluster.inspection = {
        orphans: [{ id: routeId(orphan), owner: orphan, pathPrefix: '/gone' }],
        collisions: [{ id: routeId(loser), owner: loser, pathPrefix: '/m', createdAt: '2026-11-22T00:00:01Z' }],
        // A model with no running workflow: the janitor's signal finds nobody, and it carries on.
        unpublished: [{ namespace, name: 'no-workflow' }],
      };
      const janitor = await startJanitor(tq, { intervalSeconds: 60 });
      await eventually('both routes withdrawn', () => cluster.withdrawn.length === 2);
      expect(cluster.withdrawn.sort()).toEqual([routeId(orphan), routeId(loser)].sort());
      // The collision's loser is woken to report the conflict.
      await eventually('the loser woken', async () => (await model.query(stateQuery)).signals > signalsBefore);

      // A sweep signal runs the next sweep at once instead of after the interval.
      const sweeps = cluster.calls.inspectGateway ?? 0;
      await janitor.signal(janitorSweepSignal);
      await eventually('a sweep on request', () => (cluster.calls.inspectGateway ?? 0) > sweeps);
      expect((await janitor.describe()).status.name).toBe('RUNNING');
      await janitor.terminate();
      await model.terminate();
    });
  });

  it('continues as new after 50 sweeps, carrying the count of routes it removed', async () => {
    const cluster = new FakeCluster();
    const orphan = { namespace: 'ns', name: 'gone', uid: 'uid-9' };
    cluster.inspection = {
      orphans: [{ id: routeId(orphan), owner: orphan, pathPrefix: '/gone' }],
      collisions: [],
      unpublished: [],
    };
    await wf.withWorker(cluster, async (tq) => {
      const janitor = await startJanitor(tq, { intervalSeconds: 60, removed: 4 });
      await eventually('the first sweep', () => cluster.withdrawn.length === 1);
      await wf.env.sleep('51 minutes');
      const first = wf.env.client.workflow.getHandle(janitor.workflowId, janitor.firstExecutionRunId);
      await eventually(
        'the first run continued as new',
        async () => (await first.describe()).status.name === 'CONTINUED_AS_NEW',
      );
      const history = await wf.env.client.workflow.getHandle(janitor.workflowId).fetchHistory();
      const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
      const input = JSON.parse(Buffer.from(payload!).toString('utf8')) as JanitorInput;
      expect(input).toEqual({ intervalSeconds: 60, removed: 5 });
      expect(cluster.calls.inspectGateway).toBeGreaterThanOrEqual(50);
      await wf.env.client.workflow.getHandle(janitor.workflowId).terminate();
    });
  });
});
