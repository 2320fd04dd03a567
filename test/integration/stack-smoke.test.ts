import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { NativeConnection, Worker } from '@temporalio/worker';
import { describe, expect, inject, it } from 'vitest';
import { writeServiceAccountKubeconfig } from '../../tools/local-stack/kubeconfig.js';
import { kubectlRun } from '../../tools/local-stack/stack.js';
import * as smokeActivities from '../fixtures/smoke-activities.js';
import { eventually } from '../support/eventually.js';

const stack = inject('stack');
const kubectl = (...args: string[]) => kubectlRun(stack, args);
const workflowsPath = fileURLToPath(new URL('../fixtures/smoke-workflows.ts', import.meta.url));

describe('Kubernetes control plane', () => {
  const ns = `smoke-${randomUUID().slice(0, 8)}`;

  it('runs a Deployment to Available on the KWOK node', async () => {
    kubectl('create', 'namespace', ns);
    kubectl('-n', ns, 'create', 'deployment', 'web', '--image=registry.example/web:1', '--replicas=3');
    const ready = await eventually('3 ready replicas', () => {
      const out = kubectl(
        '-n',
        ns,
        'get',
        'deployment',
        'web',
        '-o',
        'jsonpath={.status.readyReplicas}/{.status.replicas}',
      );
      return out === '3/3' ? out : undefined;
    });
    expect(ready).toBe('3/3');
    const available = kubectl(
      '-n',
      ns,
      'get',
      'deployment',
      'web',
      '-o',
      'jsonpath={.status.conditions[?(@.type=="Available")].status}',
    );
    expect(available).toBe('True');
  });

  it('schedules a Pod that asks for a GPU', async () => {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'gpu', namespace: ns },
      spec: {
        containers: [{ name: 'm', image: 'registry.example/m:1', resources: { limits: { 'nvidia.com/gpu': '1' } } }],
      },
    };
    kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(pod));
    const phase = await eventually('GPU pod Running', () => {
      const p = kubectl('-n', ns, 'get', 'pod', 'gpu', '-o', 'jsonpath={.status.phase}');
      return p === 'Running' ? p : undefined;
    });
    expect(phase).toBe('Running');
  });

  it('garbage-collects a dependent when its owner is deleted', async () => {
    kubectl('-n', ns, 'create', 'configmap', 'owner');
    const uid = kubectl('-n', ns, 'get', 'configmap', 'owner', '-o', 'jsonpath={.metadata.uid}');
    const dependent = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'dependent',
        namespace: ns,
        ownerReferences: [
          { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid, controller: true, blockOwnerDeletion: true },
        ],
      },
    };
    kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(dependent));
    expect(kubectl('-n', ns, 'get', 'configmap', 'dependent', '-o', 'name')).toContain('dependent');
    kubectl('-n', ns, 'delete', 'configmap', 'owner');
    const gone = await eventually('dependent deleted', () => {
      const names = kubectl('-n', ns, 'get', 'configmaps', '-o', 'jsonpath={.items[*].metadata.name}');
      return names.includes('dependent') ? undefined : names;
    });
    expect(gone).not.toContain('dependent');
  });

  it('allocates a ClusterIP to a Service', () => {
    kubectl('-n', ns, 'create', 'service', 'clusterip', 'web', '--tcp=80:8080');
    const ip = kubectl('-n', ns, 'get', 'service', 'web', '-o', 'jsonpath={.spec.clusterIP}');
    expect(ip).toMatch(/^10\.96\.\d+\.\d+$/);
  });

  it('authorizes a ServiceAccount by RBAC, not by default', async () => {
    kubectl('-n', ns, 'create', 'serviceaccount', 'reader');
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'sa-')), 'kubeconfig');
    writeServiceAccountKubeconfig({
      kubectl: stack.binaries.kubectl,
      adminKubeconfig: stack.kubeconfig,
      namespace: ns,
      serviceAccount: 'reader',
      file,
    });
    const asReader = (...args: string[]) => kubectlRun({ ...stack, kubeconfig: file }, args).trim();
    expect(asReader('auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}')).toBe(
      `system:serviceaccount:${ns}:reader`,
    );
    expect(() => asReader('-n', ns, 'get', 'pods')).toThrow(/forbidden/);
    kubectl('-n', ns, 'create', 'role', 'pod-reader', '--verb=list', '--resource=pods');
    kubectl('-n', ns, 'create', 'rolebinding', 'reader', '--role=pod-reader', `--serviceaccount=${ns}:reader`);
    const pods = await eventually('RBAC to admit the binding', () => asReader('-n', ns, 'get', 'pods', '-o', 'name'));
    expect(pods).toContain('pod/');
  });
});

describe('Temporal', () => {
  it('completes a workflow with one activity on the dev server', async () => {
    const connection = await NativeConnection.connect({ address: stack.temporalAddress });
    const taskQueue = `smoke-${randomUUID()}`;
    try {
      const worker = await Worker.create({
        connection,
        namespace: stack.temporalNamespace,
        taskQueue,
        workflowsPath,
        activities: smokeActivities,
      });
      const client = new Client({
        connection: await Connection.connect({ address: stack.temporalAddress }),
        namespace: stack.temporalNamespace,
      });
      const result = await worker.runUntil(
        client.workflow.execute('greeting', { taskQueue, workflowId: `smoke-${randomUUID()}`, args: ['stack'] }),
      );
      expect(result).toBe('hello, stack');
      await client.connection.close();
    } finally {
      await connection.close();
    }
  });

  it('skips an hour of durable sleep on the time-skipping server', async () => {
    const env = await TestWorkflowEnvironment.createTimeSkipping({
      server: { executable: { type: 'existing-path', path: inject('timeSkippingServer') } },
    });
    try {
      const taskQueue = 'sleepy';
      const worker = await Worker.create({
        connection: env.nativeConnection,
        taskQueue,
        workflowsPath,
        activities: smokeActivities,
      });
      const started = Date.now();
      const result = await worker.runUntil(
        env.client.workflow.execute('sleepAnHour', { taskQueue, workflowId: 'sleepy' }),
      );
      const wallMs = Date.now() - started;
      expect(result).toBe('woke');
      // An hour of workflow time in far less wall time proves the clock was skipped, not waited out.
      expect(wallMs).toBeLessThan(60_000);
    } finally {
      await env.teardown();
    }
  });

  it('serves the Web UI', async () => {
    expect(stack.temporalUiUrl).toBeDefined();
    const res = await fetch(`${stack.temporalUiUrl}/`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/<html/i);
  });
});
