// The rollout's first ask can reach the model's workflow in the same workflow task as the rollout's
// start, when that task waited on a busy worker (seen at N=1,000 with two replicas: 229 rollouts lost).
// The SDK runs the task's signal handlers before the code that awaited the start resumes, so the model
// must know its rollout before it starts it, or the ask is dropped and the canary never comes.
// Here a worker with two workflow task slots holds the model's workflow in its cache; two other
// workflows take those slots (local activities the test holds) as the round that starts the rollout
// ends, while a second worker runs the rollout, whose ask lands on the model's waiting task.
import { randomUUID } from 'node:crypto';
import type { temporal } from '@temporalio/proto';
import { NativeConnection } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import type { Activities } from '../../activities/index.js';
import { workflowIdFor, type RolloutSpec } from '../../src/core/api.js';
import { revisionName } from '../../src/core/rollout.js';
import { reconcileSignal, stateQuery, type MachineModelWorkflowInput } from '../../workflows/definitions.js';
import { holdSignal } from '../fixtures/workflow-task-holder.js';
import { eventually } from '../support/eventually.js';
import { FakeCluster } from '../support/fake-cluster.js';
import { localActivitiesOf, type RecordedHistory } from '../support/histories.js';
import { useWorkflowTestEnv } from '../support/workflow-env.js';

const wf = useWorkflowTestEnv();

const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 20, pause: '5m' }] };
const v1 = { image: 'registry.example/m:1', modelPath: '/models/m' };
const v2 = { image: 'registry.example/m:2', modelPath: '/models/m' };

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The activity type of a local activity's marker (read as machine-model-rounds.test.ts reads them). */
const localActivityOf = (e: HistoryEvent): string | undefined =>
  localActivitiesOf({ events: [e] as RecordedHistory['events'] })[0];

/** Index of the first event after `from` that `is` matches, or -1. */
const indexAfter = (events: HistoryEvent[], from: number, is: (e: HistoryEvent) => boolean) =>
  events.findIndex((e, i) => i > from && is(e));

describe('machineModelWorkflow and its rollout, when the first ask comes with the start', () => {
  it('keeps the ask and applies the canary', async () => {
    const cluster = new FakeCluster();
    cluster.name = `m-${randomUUID().slice(0, 8)}`;
    cluster.ready = true;
    cluster.gatewayConfigured = true;
    cluster.spec = { ...cluster.spec, ...v1, rollout: plan };
    const { client } = wf.env;
    const taskQueue = `wf-${randomUUID()}`;
    // The busy worker's two workflow task slots (the fewest a worker with a cache may have).
    const holders = [`holder-${randomUUID()}`, `holder-${randomUUID()}`];

    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding = 0;
    let holderAsked = false;
    const base = cluster.activities();
    const activities = {
      ...base,
      // The round that reads v2 (and starts its rollout) asks the holders to take the slots next.
      readAndApply: async (...args: Parameters<Activities['readAndApply']>) => {
        if (cluster.spec.image === v2.image && !holderAsked) {
          holderAsked = true;
          for (const id of holders) await client.workflow.getHandle(id).signal(holdSignal);
        }
        return base.readAndApply(...args);
      },
      holdWorkflowTask: async () => {
        holding++;
        await released;
      },
    };
    const busy = await wf.worker(activities, taskQueue, {
      maxConcurrentWorkflowTaskExecutions: 2,
      // The model's next task waits for this worker rather than move to the task queue.
      stickyQueueScheduleToStartTimeout: '1 minute',
    });
    // On a connection of its own: the SDK registers one worker a task queue on a connection.
    const connection = await NativeConnection.connect({ address: wf.env.address });
    const other = await wf.worker(activities, taskQueue, { connection });

    const input: MachineModelWorkflowInput = { namespace: 'default', name: cluster.name };
    const handle = client.workflow.getHandle(workflowIdFor('default', cluster.name));
    // Released however the test ends: the holders' tasks would otherwise time out first.
    const holdingBody = async () => {
      // Both start while the busy worker is alone on the queue, so both stay in its cache.
      for (const workflowId of holders)
        await client.workflow.start('workflowTaskHolderWorkflow', { taskQueue, workflowId });
      await client.workflow.start('machineModelWorkflow', { taskQueue, workflowId: handle.workflowId, args: [input] });
      await eventually('Ready on v1', () => cluster.status?.phase === 'Ready' && cluster.deployed?.image === v1.image);

      await other.runUntil(async () => {
        cluster.spec = { ...cluster.spec, ...v2 };
        cluster.generation++;
        await handle.signal(reconcileSignal, { source: 'MachineModel', event: 'updated', generation: 2 });
        await eventually('a holder holds the busy worker', () => holding > 0);
        await eventually('the rollout asks while the model waits', async () => {
          const events = (await handle.fetchHistory()).events ?? [];
          return events.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'rolloutReport');
        });
        release();
        await eventually(
          'the canary of v2',
          () => cluster.canary.exists && cluster.canary.revision === revisionName(v2),
          15_000,
        );
        await eventually('the canary at 20 %', () => cluster.canary.weight === 20);

        const events = (await handle.fetchHistory()).events ?? [];
        const started = events.findIndex((e) => e.childWorkflowExecutionStartedEventAttributes);
        const asked = indexAfter(
          events,
          started,
          (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'rolloutReport',
        );
        const nextTask = indexAfter(events, started, (e) => !!e.workflowTaskStartedEventAttributes);
        // What this test is about: the start and the ask in one task of the model's workflow.
        expect(started).toBeGreaterThan(0);
        expect(asked).toBeGreaterThan(started);
        expect(nextTask).toBeGreaterThan(asked);
        // And served in that task, not after the rollout asked again.
        const canaryApplied = indexAfter(events, nextTask, (e) => localActivityOf(e) === 'syncCanary');
        const following = indexAfter(events, nextTask, (e) => !!e.workflowTaskStartedEventAttributes);
        expect(canaryApplied).toBeGreaterThan(nextTask);
        expect(following === -1 || following > canaryApplied).toBe(true);
        const { rollout } = await handle.query(stateQuery);
        await handle.terminate();
        await client.workflow
          .getHandle(rollout!.workflowId)
          .terminate()
          .catch(() => undefined);
      });
    };
    await busy.runUntil(holdingBody().finally(release));
    await connection.close();
  });
});
