// An operator process and its models on the real apiserver: children, status, scaling, drift, deletion,
// manual resyncs, mmctl and metrics.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cpuUsageAnnotation } from '../../tools/local-stack/metrics-server.js';
import { freePort } from '../../tools/local-stack/processes.js';
import { finalizerName, workflowIdFor } from '../../src/core/api.js';
import { selectorString } from '../../src/core/desired-state.js';
import { recommendedNodeOptions } from '../../src/process/heap-bound.js';
import { startOptions } from '../../src/temporal/workflow-client.js';
import { stateQuery, workflowType } from '../../workflows/definitions.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel, seedExample } from '../support/models.js';
import {
  installCrds,
  operatorLog,
  operatorMetric,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';
import type { StackInfo } from '../../tools/local-stack/stack.js';

/**
 * The scenarios, against the stack given: the stack's own Temporal, or the PostgreSQL one
 * (temporal-postgres.test.ts). `againstAnotherTemporal` leaves out what only Kubernetes decides (the
 * autoscaler's bounds: a minute of the suite that the first run already proved).
 */
export function operatorLifecycle(stack: StackInfo, { againstAnotherTemporal = false } = {}): void {
  const kubernetesOnly: typeof it = againstAnotherTemporal ? (((..._args: unknown[]) => undefined) as typeof it) : it;
  const mmctl = fileURLToPath(new URL('../../dist/src/mmctl.js', import.meta.url));
  const k = kubectlFor(stack);
  let ns: string;
  let operator: OperatorProcess;
  let client: Client;
  let metricsPort: number;
  let sdkMetricsPort: number;
  const taskQueue = `mmo-${randomUUID()}`;

  beforeAll(async () => {
    installCrds(stack);
    ns = k.createNamespace('lifecycle');
    metricsPort = await freePort();
    sdkMetricsPort = await freePort();
    operator = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns,
        MMO_TASK_QUEUE: taskQueue,
        MMO_METRICS_PORT: String(metricsPort),
        MMO_SDK_METRICS_PORT: String(sdkMetricsPort),
        // Its heaps bounded as the image bounds them (a unit test holds the two equal), so it sizes its
        // workflow cache as the image's would.
        NODE_OPTIONS: recommendedNodeOptions,
      },
      'lifecycle',
    );
    client = await temporalClient(stack);
  });

  afterAll(async () => {
    await operator?.stop();
    await client?.connection.close();
  });

  const phaseOf = (name: string) => k.phaseOf(ns, name);
  const readyModel = (name: string, timeoutMs = 60_000) =>
    eventually<any>(
      `${name} Ready`,
      () => (phaseOf(name) === 'Ready' ? k.get('machinemodel', ns, name) : undefined),
      timeoutMs,
    );

  describe('operator lifecycle against the real apiserver', () => {
    it('serves the seed example: children with controller ownerReference, phase Ready, inferenceURL, Events', async () => {
      k.apply({ ...seedExample, metadata: { ...seedExample.metadata, namespace: ns } });
      const name = seedExample.metadata.name;
      const mm = await readyModel(name);
      expect(mm.status.ready).toBe('2/2');
      expect(k.kubectl('-n', ns, 'get', 'mm', name)).toMatch(new RegExp(`\\n${name}\\s+Ready\\s+2/2\\s+http://`));
      // No gateway here: nothing outside the namespace to clean up, so no finalizer holds a deletion.
      expect(mm.metadata.finalizers ?? []).not.toContain(finalizerName);
      expect(mm.status.inferenceURL).toBe(`http://${name}.${ns}.svc.cluster.local:80`);
      expect(mm.status.observedGeneration).toBe(mm.metadata.generation);
      expect(conditionOf(mm, 'Ready')?.status).toBe('True');

      for (const kind of ['deployment', 'service', 'horizontalpodautoscaler']) {
        const child = k.get(kind, ns, name);
        const owner = child.metadata.ownerReferences[0];
        expect(owner).toMatchObject({
          kind: 'MachineModel',
          name,
          uid: mm.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        });
        expect(child.metadata.labels['app.kubernetes.io/managed-by']).toBe('machinemodel-operator');
      }
      const deployment = k.get('deployment', ns, name);
      const container = deployment.spec.template.spec.containers[0];
      expect(container.image).toBe('my-registry/image-classifier:v1.2.0');
      expect(container.resources.limits['nvidia.com/gpu']).toBe('1');
      expect(container.env).toContainEqual({
        name: 'MODEL_PATH',
        value: '/techblog/en/app/models/image_classifier.pb',
      });
      expect(k.get('service', ns, name).spec.ports[0]).toMatchObject({ name: 'http', appProtocol: 'http' });
      expect(k.get('horizontalpodautoscaler', ns, name).spec).toMatchObject({ minReplicas: 2, maxReplicas: 5 });

      const reasons = await eventually('Created and Ready events', () => {
        const events = k
          .list('events', ns)
          .filter((e) => e.involvedObject.name === name && e.involvedObject.kind === 'MachineModel');
        const r = new Set(events.map((e) => e.reason as string));
        return r.has('Created') && r.has('Ready') ? r : undefined;
      });
      expect([...reasons]).toEqual(expect.arrayContaining(['Created', 'Ready']));
    });

    kubernetesOnly(
      'follows replica bounds: Deployment replicas without an autoscaler, HPA bounds with one',
      async () => {
        k.apply(machineModel(ns, 'fixed', { minReplicas: 1, maxReplicas: 1 }));
        await readyModel('fixed');
        expect(k.get('horizontalpodautoscaler', ns, 'fixed')).toBeUndefined();
        k.kubectl('-n', ns, 'patch', 'mm', 'fixed', '--type=merge', '-p', '{"spec":{"minReplicas":3,"maxReplicas":3}}');
        await eventually('3 replicas', () =>
          k.get('deployment', ns, 'fixed')?.spec.replicas === 3 ? true : undefined,
        );
        await eventually('Ready with 3', () =>
          phaseOf('fixed') === 'Ready' && k.get('machinemodel', ns, 'fixed').status.replicas === 3 ? true : undefined,
        );

        // With an autoscaler the operator sets the HPA's bounds and leaves replicas to it.
        k.kubectl('-n', ns, 'patch', 'mm', 'fixed', '--type=merge', '-p', '{"spec":{"minReplicas":2,"maxReplicas":6}}');
        const hpa = await eventually('HPA 2..6', () => {
          const h = k.get('horizontalpodautoscaler', ns, 'fixed');
          return h?.spec.minReplicas === 2 && h?.spec.maxReplicas === 6 ? h : undefined;
        });
        expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: 'fixed' });
        // metrics-server scrapes kwok's simulated usage (1m CPU at rest): the autoscaler can act.
        const active = await eventually(
          'Autoscaling condition True',
          () => {
            const c = conditionOf(k.get('machinemodel', ns, 'fixed'), 'Autoscaling');
            return c?.status === 'True' ? c : undefined;
          },
          120_000,
        );
        expect(active.reason).toBe('ValidMetricFound');
        // Raise the load: each pod now uses 4 times the 100m it requests, far above the 80% target.
        k.kubectl(
          '-n',
          ns,
          'annotate',
          'pods',
          '-l',
          selectorString('fixed'),
          '--overwrite',
          `${cpuUsageAnnotation}=400m`,
        );
        await eventually(
          'the HPA scales the Deployment to its maximum',
          () => (k.get('deployment', ns, 'fixed')?.spec.replicas === 6 ? true : undefined),
          120_000,
        );
        const scaled = await eventually('the model reports 6/6', () => {
          const m = k.get('machinemodel', ns, 'fixed');
          return m.status?.ready === '6/6' ? m : undefined;
        });
        expect(scaled.status.phase).toBe('Ready');
        expect(scaled.spec).toMatchObject({ minReplicas: 2, maxReplicas: 6 });
        expect(conditionOf(scaled, 'Autoscaling')?.status).toBe('True');
        // Back to fixed: the HPA goes away.
        k.kubectl('-n', ns, 'patch', 'mm', 'fixed', '--type=merge', '-p', '{"spec":{"minReplicas":2,"maxReplicas":2}}');
        await eventually('HPA removed', () =>
          k.get('horizontalpodautoscaler', ns, 'fixed') === undefined ? true : undefined,
        );
        await eventually('2 replicas', () =>
          k.get('deployment', ns, 'fixed')?.spec.replicas === 2 ? true : undefined,
        );
        await eventually('no Autoscaling condition without an autoscaler', () =>
          conditionOf(k.get('machinemodel', ns, 'fixed'), 'Autoscaling') === undefined ? true : undefined,
        );
        // Two of its waits run on the autoscaler's clock (metrics-server scrapes, HPA syncs): up to 120 s each.
      },
      300_000,
    );

    it('kubectl scale fixes the size (spec.replicas) over the autoscaler; removing it brings the autoscaler back', async () => {
      k.apply(machineModel(ns, 'scaled', { minReplicas: 1, maxReplicas: 4 }));
      await readyModel('scaled');
      await eventually('its HPA', () => k.get('horizontalpodautoscaler', ns, 'scaled'));

      expect(k.kubectl('-n', ns, 'scale', 'mm', 'scaled', '--replicas=3')).toContain('scaled');
      const mm = await eventually('3/3 Ready', () => {
        const m = k.get('machinemodel', ns, 'scaled');
        return m.status?.phase === 'Ready' && m.status.ready === '3/3' ? m : undefined;
      });
      expect(mm.spec).toMatchObject({ replicas: 3, minReplicas: 1, maxReplicas: 4 });
      expect(k.get('deployment', ns, 'scaled').spec.replicas).toBe(3);
      await eventually('no HPA while the size is fixed', () =>
        k.get('horizontalpodautoscaler', ns, 'scaled') === undefined ? true : undefined,
      );
      expect(k.kubectl('-n', ns, 'get', 'mm', 'scaled')).toMatch(/\nscaled\s+Ready\s+3\/3\s/);
      const scale = JSON.parse(
        k.kubectl('get', '--raw', `/apis/stable.example.com/v1/namespaces/${ns}/machinemodels/scaled/scale`),
      );
      expect(scale.spec.replicas).toBe(3);
      expect(scale.status).toMatchObject({ replicas: 3, selector: mm.status.selector });

      let refused = '';
      try {
        k.kubectl('-n', ns, 'scale', 'mm', 'scaled', '--replicas=0');
      } catch (err) {
        refused = String((err as { stderr?: string }).stderr);
      }
      expect(refused).toMatch(/spec.replicas.*greater than or equal to 1/);

      k.kubectl('-n', ns, 'patch', 'mm', 'scaled', '--type=json', '-p', '[{"op":"remove","path":"/spec/replicas"}]');
      const hpa = await eventually<any>('the HPA back with the bounds', () =>
        k.get('horizontalpodautoscaler', ns, 'scaled'),
      );
      expect(hpa.spec).toMatchObject({ minReplicas: 1, maxReplicas: 4 });
    });

    it('restores drift: kubectl scale to 0 and kubectl delete deployment', async () => {
      k.apply(machineModel(ns, 'drift', { minReplicas: 2, maxReplicas: 2 }));
      await readyModel('drift');
      k.kubectl('-n', ns, 'scale', 'deployment', 'drift', '--replicas=0');
      await eventually('replicas restored to 2', () => {
        const d = k.get('deployment', ns, 'drift');
        return d?.spec.replicas === 2 && d.status.readyReplicas === 2 ? true : undefined;
      });
      const oldUid = k.get('deployment', ns, 'drift').metadata.uid;
      k.kubectl('-n', ns, 'delete', 'deployment', 'drift', '--wait=true');
      const recreated = await eventually('Deployment recreated', () => {
        const d = k.get('deployment', ns, 'drift');
        return d && d.metadata.uid !== oldUid ? d : undefined;
      });
      expect(recreated.metadata.ownerReferences[0].kind).toBe('MachineModel');
      await readyModel('drift');
    });

    it("reports a model no node can place as Pending with the scheduler's reason, and recovers when the ask fits", async () => {
      // The fake node has 16 GPUs.
      k.apply(machineModel(ns, 'greedy', { resources: { cpu: '100m', memory: '128Mi', gpu: 32 } }));
      const pending = await eventually<any>('greedy Pending', () =>
        phaseOf('greedy') === 'Pending' ? k.get('machinemodel', ns, 'greedy') : undefined,
      );
      const ready = conditionOf(pending, 'Ready');
      expect(ready).toMatchObject({ status: 'False', reason: 'Unschedulable' });
      expect(ready?.message).toContain('Insufficient nvidia.com/gpu');
      const wide = k.kubectl('-n', ns, 'get', 'mm', 'greedy', '-o', 'wide').split('\n');
      expect(wide[0]).toMatch(/PHASE\s+READY\s+URL\s+REASON\s+GATEWAY\s+AGE/);
      expect(wide[1]).toMatch(/Pending\s+0\/1\s+\S+\s+Unschedulable/);
      await eventually('an Unschedulable Event', () =>
        k
          .list('events', ns)
          .some((e) => e.involvedObject.name === 'greedy' && e.reason === 'Unschedulable' && e.type === 'Warning')
          ? true
          : undefined,
      );
      k.kubectl('-n', ns, 'patch', 'mm', 'greedy', '--type=merge', '-p', '{"spec":{"resources":{"gpu":1}}}');
      await readyModel('greedy');
    });

    it('on deletion: children collected, workflow completed', async () => {
      k.apply(machineModel(ns, 'doomed'));
      await readyModel('doomed');
      k.kubectl('-n', ns, 'delete', 'mm', 'doomed', '--wait=true', '--timeout=60s');
      expect(k.get('machinemodel', ns, 'doomed')).toBeUndefined();
      await eventually('children garbage-collected', () =>
        k.get('deployment', ns, 'doomed') === undefined && k.get('service', ns, 'doomed') === undefined
          ? true
          : undefined,
      );
      const handle = client.workflow.getHandle(workflowIdFor(ns, 'doomed'));
      await eventually('workflow completed', async () =>
        (await handle.describe()).status.name === 'COMPLETED' ? true : undefined,
      );
      // The children's garbage collection wakes nobody: no run is started just to find the model gone.
      await sleep(2_000);
      const runs: string[] = [];
      for await (const w of client.workflow.list({ query: `WorkflowId = '${workflowIdFor(ns, 'doomed')}'` }))
        runs.push(w.status.name);
      expect(runs).toEqual(['COMPLETED']);
    });

    it('delete and recreate with the same name: the new object ends up served, its children its own', async () => {
      k.apply(machineModel(ns, 'phoenix'));
      const old = await readyModel('phoenix');
      k.kubectl('-n', ns, 'delete', 'mm', 'phoenix', '--wait=true', '--timeout=60s');
      k.apply(machineModel(ns, 'phoenix', { image: 'registry.example.com/models/classifier:v2' }));
      const reborn = await readyModel('phoenix');
      expect(reborn.metadata.uid).not.toBe(old.metadata.uid);
      const d = await eventually('Deployment owned by the new object', () => {
        const dep = k.get('deployment', ns, 'phoenix');
        return dep?.metadata.ownerReferences[0].uid === reborn.metadata.uid ? dep : undefined;
      });
      expect(d.spec.template.spec.containers[0].image).toBe('registry.example.com/models/classifier:v2');
      expect(k.get('service', ns, 'phoenix').metadata.ownerReferences[0].uid).toBe(reborn.metadata.uid);
    });

    it('answers a manual resync through the reconcileNow update with the outcome', async () => {
      k.apply(machineModel(ns, 'manual'));
      await readyModel('manual');
      const handle = client.workflow.getHandle(workflowIdFor(ns, 'manual'));
      const before = (await handle.query(stateQuery)).rounds;
      const outcome = await handle.executeUpdate('reconcileNow', { args: [{ requestedBy: 'test' }] });
      expect(outcome).toMatchObject({ phase: 'Ready', finished: false });
      expect((outcome as { round: number }).round).toBeGreaterThan(before);
    });

    it('serves quantities given as whole numbers or in a form the apiserver rewrites, without rewriting them each round', async () => {
      k.apply(machineModel(ns, 'numbers', { resources: { cpu: 2, memory: '0.5Gi' } }));
      await readyModel('numbers');
      const deployment = k.get('deployment', ns, 'numbers');
      expect(deployment.spec.template.spec.containers[0].resources.limits).toEqual({ cpu: '2', memory: '512Mi' });
      const env = { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress, MMO_TASK_QUEUE: taskQueue };
      const out = execFileSync(process.execPath, [mmctl, 'resync', `${ns}/numbers`, '--wait'], {
        env,
        encoding: 'utf8',
      });
      expect(out).toContain('changes: none');
      expect(k.get('deployment', ns, 'numbers').metadata.resourceVersion).toBe(deployment.metadata.resourceVersion);
    });

    it('resyncs on the resync annotation and through mmctl', async () => {
      k.apply(machineModel(ns, 'nudge'));
      await readyModel('nudge');
      const handle = client.workflow.getHandle(workflowIdFor(ns, 'nudge'));
      const before = (await handle.query(stateQuery)).rounds;
      k.kubectl('-n', ns, 'annotate', 'mm', 'nudge', 'stable.example.com/resync=first');
      await eventually('a round after the annotation', async () =>
        (await handle.query(stateQuery)).rounds > before ? true : undefined,
      );

      const env = { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress, MMO_TASK_QUEUE: taskQueue };
      const out = execFileSync(process.execPath, [mmctl, 'resync', `${ns}/nudge`, '--wait'], {
        env,
        encoding: 'utf8',
      });
      expect(out).toMatch(new RegExp(`${ns}/nudge: round \\d+, phase Ready`));
      expect(out).toContain('Ready=True ModelReady');

      const bad = spawnSync(process.execPath, [mmctl, 'resync', 'no-slash'], {
        env,
        encoding: 'utf8',
      });
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toContain('expected <namespace>/<name>');
      expect(bad.stderr).not.toMatch(/\n\s+at /);
    });

    it('mmctl tells status, history, list and the Web UI link, in words and as JSON, with exit codes', async () => {
      const env = { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress, MMO_TASK_QUEUE: taskQueue };
      const run = (...args: string[]) => spawnSync(process.execPath, [mmctl, ...args], { env, encoding: 'utf8' });
      const ok = (...args: string[]) => {
        const r = run(...args);
        expect(r.stderr).toBe('');
        expect(r.status).toBe(0);
        return r.stdout;
      };
      k.apply(machineModel(ns, 'story'));
      await readyModel('story');
      k.apply(machineModel(ns, 'story', { image: 'registry.example.com/models/classifier:v2' }));
      await eventually('v2 Ready', () => {
        const mm = k.get('machinemodel', ns, 'story');
        return mm?.status?.observedGeneration === 2 && mm.status.phase === 'Ready' ? mm : undefined;
      });

      const history = ok('history', `${ns}/story`, '--rounds', '20');
      expect(history).toMatch(new RegExp(`^${ns}/story: the last \\d+ rounds, oldest first\n`));
      expect(history).toMatch(
        /trigger +workflow started, MachineModel added \(generation 1\)\n +changed +Deployment created, Service created/,
      );
      expect(history).toMatch(
        /trigger +MachineModel updated \(generation 2\)\n +changed +Deployment updated: image registry.example.com\/models\/classifier:v1 → registry.example.com\/models\/classifier:v2\n +phase +Ready → Deploying/,
      );
      expect(history).toMatch(/phase +Deploying → Ready/);
      const rounds = JSON.parse(ok('history', `${ns}/story`, '--rounds', '2', '-o', 'json'));
      expect(rounds).toHaveLength(2);
      expect(rounds[1]).toMatchObject({ phaseAfter: 'Ready', errors: [] });

      const status = ok('status', `${ns}/story`);
      expect(status).toMatch(new RegExp(`^${ns}/story: phase Ready, workflow Running\n`));
      expect(status).toContain('condition  Ready=True ModelReady');
      expect(status).toMatch(/pending +nothing\n +last round:\n/);
      const statusJson = JSON.parse(ok('status', `${ns}/story`, '--output', 'json'));
      expect(statusJson).toMatchObject({
        model: `${ns}/story`,
        phase: 'Ready',
        workflowStatus: 'Running',
        pending: [],
      });

      const listed = JSON.parse(ok('list', '-n', ns, '-o', 'json'));
      expect(listed).toContainEqual(expect.objectContaining({ model: `${ns}/story`, workflowStatus: 'Running' }));
      expect(listed.every((m: { model: string }) => m.model.startsWith(`${ns}/`))).toBe(true);
      // Closed workflows (deleted models, as in the deletion test above) only with --all, and without a phase.
      expect(listed.every((m: { workflowStatus: string }) => m.workflowStatus === 'Running')).toBe(true);
      const all = JSON.parse(ok('list', '-n', ns, '--all', '-o', 'json'));
      const closed = all.filter((m: { workflowStatus: string }) => m.workflowStatus === 'Completed');
      expect(closed.length).toBeGreaterThan(0);
      expect(closed.every((m: { phase?: string }) => m.phase === undefined)).toBe(true);
      expect(ok('list', '-n', ns)).toMatch(
        new RegExp(`^MODEL +PHASE +WORKFLOW +STARTED\n(.*\n)*${ns}/story +Ready +Running +`),
      );

      expect(ok('ui', `${ns}/story`, '--ui-url', 'http://ui.example:8233/')).toBe(
        `http://ui.example:8233/namespaces/default/workflows/${encodeURIComponent(`machinemodel/${ns}/story`)}/${statusJson.runId}/history\n`,
      );

      const oneLine = (r: ReturnType<typeof run>, code: number, text: string) => {
        expect(r.status).toBe(code);
        expect(r.stderr).toContain(text);
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
      };
      // A workflow no operator serves (no worker polls its task queue): status says so instead of hanging.
      const orphanQueue = `nobody-${randomUUID()}`;
      await client.workflow.start(
        workflowType,
        startOptions({ namespace: ns, name: 'orphan' }, { taskQueue: orphanQueue, workflow: {} }),
      );
      try {
        expect(ok('status', `${ns}/orphan`)).toContain(
          `pending    no operator answered within 5 s (is one running on task queue ${orphanQueue}?)`,
        );
      } finally {
        await client.workflow.getHandle(workflowIdFor(ns, 'orphan')).terminate();
      }

      oneLine(run('status', `${ns}/nobody`), 3, `mmctl: no workflow for ${ns}/nobody`);
      oneLine(run('history', `${ns}/nobody`), 3, `mmctl: no workflow for ${ns}/nobody`);
      oneLine(run('status', 'no-slash'), 2, 'expected <namespace>/<name>');
      oneLine(run('list', '-o', 'yaml'), 2, "'yaml' is invalid");
      const nobodyListens = `127.0.0.1:${await freePort()}`;
      oneLine(
        run('status', `${ns}/story`, '--temporal-address', nobodyListens),
        4,
        `cannot reach Temporal at ${nobodyListens}`,
      );
    });

    it('exposes Prometheus metrics of the informer, signaler, rounds, activities and the Temporal worker', async () => {
      expect(await operatorMetric(metricsPort, 'machinemodel_operator_signals_sent_total')).toBeGreaterThan(0);
      expect(await operatorMetric(metricsPort, 'machinemodel_operator_signals_pending')).toBe(0);
      expect(await operatorMetric(metricsPort, 'machinemodel_operator_watch_events_total')).toBeGreaterThan(0);

      const ready = 'machinemodel_operator_reconcile_rounds_total{result="ready"}';
      const readyDurations = 'machinemodel_operator_reconcile_round_duration_seconds_count{result="ready"}';
      const reads = 'machinemodel_operator_activity_attempts_total{activity="readAndApply",local="true",result="ok"}';
      k.apply(machineModel(ns, 'counted'));
      // A name someone else's Deployment holds: a Failed round, an apply refused for good (terminal).
      k.kubectl('-n', ns, 'create', 'deployment', 'counted-taken', '--image=registry.example.com/other:1');
      k.apply(machineModel(ns, 'counted-taken'));
      await readyModel('counted');
      await eventually('counted-taken Failed', () => (phaseOf('counted-taken') === 'Failed' ? true : undefined));
      const before = {
        ready: await operatorMetric(metricsPort, ready),
        reads: await operatorMetric(metricsPort, reads),
      };
      expect(before.ready).toBeGreaterThan(0);
      expect(await operatorMetric(metricsPort, readyDurations)).toBeGreaterThan(0);
      expect(
        await operatorMetric(metricsPort, 'machinemodel_operator_reconcile_rounds_total{result="failed"}'),
      ).toBeGreaterThan(0);
      expect(
        await operatorMetric(
          metricsPort,
          'machinemodel_operator_activity_attempts_total{activity="readAndApply",local="true",result="terminal"}',
        ),
      ).toBeGreaterThan(0);

      // They move: one more round on request is one more Ready round and one more read.
      const env = { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress, MMO_TASK_QUEUE: taskQueue };
      execFileSync(process.execPath, [mmctl, 'resync', `${ns}/counted`, '--wait'], { env });
      await eventually('the counters after a resync', async () =>
        (await operatorMetric(metricsPort, ready)) > before.ready &&
        (await operatorMetric(metricsPort, reads)) > before.reads
          ? true
          : undefined,
      );

      const sdk = await (await fetch(`http://127.0.0.1:${sdkMetricsPort}/metrics`)).text();
      for (const name of [
        'temporal_worker_task_slots_available',
        'temporal_workflow_task_schedule_to_start_latency',
        'temporal_sticky_cache_size',
      ]) {
        expect(sdk).toMatch(new RegExp(`^${name}\\S* `, 'm'));
      }
      expect(sdk).toContain(`task_queue="${taskQueue}"`);

      // The image's heap bounds give the SDK's cache of 111; the operator keeps twice the start gate's 64, and 16 more.
      const started = operatorLog(operator).filter((line) => line.msg === 'worker running');
      expect(started.map((line) => line.cachedWorkflows)).toEqual([144]);
    });

    it('never touches a Deployment someone else owns, and says so', async () => {
      k.kubectl('-n', ns, 'create', 'deployment', 'taken', '--image=registry.example.com/other:1');
      k.apply(machineModel(ns, 'taken'));
      const ready = await eventually('Failed with NotOwned', () => {
        const c = conditionOf(k.get('machinemodel', ns, 'taken'), 'Ready');
        return c?.reason === 'NotOwned' ? c : undefined;
      });
      expect(phaseOf('taken')).toBe('Failed');
      expect(ready.message).toContain(`Deployment ${ns}/taken exists and is not owned by this MachineModel`);
      expect(k.get('deployment', ns, 'taken').spec.template.spec.containers[0].image).toBe(
        'registry.example.com/other:1',
      );
      expect(k.get('service', ns, 'taken')).toBeUndefined();
    });
  });
}
