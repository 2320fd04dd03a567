// A rollout outlives a restart of Temporal itself: the server (a dev server of its own, on its own
// SQLite file) is killed with SIGKILL in the middle of a pause and started again on the same file.
// The operator reconnects, the canary keeps its share meanwhile, and the rollout finishes at the same
// step: its weight set once, its pause ending when it would have without the outage, one run, completed.
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import type { RolloutSpec } from '../../src/core/api.js';
import { freePort, stopProcess, waitUntil, type ManagedProcess } from '../../tools/local-stack/processes.js';
import {
  startTemporalDevServer,
  temporalServing,
  type DevServerOptions,
} from '../../tools/local-stack/temporal-dev-server.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import { rolloutHistory } from '../support/rollout-history.js';
import { installCrds, startOperatorProcess, type OperatorProcess } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let ns: string;
let operator: OperatorProcess;
let temporal: ManagedProcess;
let server: DevServerOptions;
let address: string;

const pauseSeconds = 60;
const plan: RolloutSpec = { strategy: 'Canary', steps: [{ weight: 50, pause: `${pauseSeconds}s` }] };
const status = () => k.get('machinemodel', ns, 'restarted')?.status;

async function startTemporal() {
  temporal = startTemporalDevServer(server);
  await waitUntil(temporal, 'serving', () => temporalServing(server.binary, address), 60_000);
}

beforeAll(async () => {
  installCrds(stack);
  ns = k.createNamespace('temporal-restart');
  const dir = mkdtempSync(path.join(stack.stateDir, 'temporal-restart-'));
  server = {
    binary: stack.binaries.temporal,
    ports: { grpc: await freePort(), http: await freePort(), metrics: await freePort(), ui: await freePort() },
    dbFile: path.join(dir, 'temporal.db'),
    namespace: stack.temporalNamespace,
    logFile: path.join(dir, 'temporal.log'),
  };
  address = `127.0.0.1:${server.ports.grpc}`;
  await startTemporal();
  operator = startOperatorProcess(
    stack,
    { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `mmo-${randomUUID()}`, TEMPORAL_ADDRESS: address },
    'temporal-restart',
  );
}, 120_000);

afterAll(async () => {
  await operator?.stop();
  if (temporal) await stopProcess(temporal);
});

it('finishes a rollout at the same step after Temporal is killed and restarted in the middle of its pause', async () => {
  k.apply(machineModel(ns, 'restarted', { image: 'registry.example/m:1', replicas: 1, rollout: plan }));
  await eventually('v1 Ready', () => (status()?.phase === 'Ready' ? true : undefined), 120_000);
  k.apply(machineModel(ns, 'restarted', { image: 'registry.example/m:2', replicas: 1, rollout: plan }));
  const workflowId = await eventually(
    'the canary at 50 %',
    () => (status()?.rollout?.weight === 50 ? (status()!.rollout!.workflowId as string) : undefined),
    120_000,
  );

  await stopProcess(temporal, 0);
  await sleep(5_000);
  // Without Temporal nothing moves: the canary keeps its share.
  expect(status()?.rollout).toMatchObject({ phase: 'Progressing', step: 1, weight: 50 });
  expect(k.get('deployment', ns, 'restarted-canary')).toBeDefined();
  await startTemporal();

  await eventually(
    'promoted after the restart',
    () => (status()?.rollout?.phase === 'Promoted' && status()?.phase === 'Ready' ? true : undefined),
    (pauseSeconds + 120) * 1000,
  );
  await eventually('the canary removed', () => (k.get('deployment', ns, 'restarted-canary') ? undefined : true));
  expect(k.get('deployment', ns, 'restarted').spec.template.spec.containers[0].image).toBe('registry.example/m:2');

  const connection = await Connection.connect({ address });
  try {
    const client = new Client({ connection, namespace: server.namespace });
    const { handle, events, weightsSet, weightSetAt } = await rolloutHistory(client, workflowId);
    // The canary got its share once (and gave it back at its promotion).
    expect(weightsSet().filter((w) => w > 0)).toHaveLength(1);
    expect(weightsSet().at(-1)).toBe(0);
    // The pause keeps its end across the outage: it ends a pause after the weight was set, not a
    // pause after Temporal came back (a pause begun again would end 15 s or more later).
    const at = (e: (typeof events)[number]) =>
      Number(String(e.eventTime?.seconds ?? 0)) + (e.eventTime?.nanos ?? 0) / 1e9;
    const lastTimer = events
      .slice(weightSetAt)
      .filter((e) => e.timerFiredEventAttributes)
      .at(-1)!;
    const pauseLasted = at(lastTimer) - at(events[weightSetAt]!);
    console.log(`pause of ${pauseSeconds} s across a Temporal restart ended after ${pauseLasted.toFixed(1)} s`);
    expect(pauseLasted).toBeGreaterThanOrEqual(pauseSeconds - 1);
    expect(pauseLasted).toBeLessThan(pauseSeconds + 10);
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect(events.filter((e) => e.workflowExecutionContinuedAsNewEventAttributes)).toEqual([]);
  } finally {
    await connection.close();
  }
}, 400_000);
