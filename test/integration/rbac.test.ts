import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { kubectlRun } from '../../tools/local-stack/stack.js';
import { KubeConfig } from '@kubernetes/client-node';
import { recordEvent } from '../../activities/events.js';
import { KubeClient } from '../../activities/kube-client.js';
import { finalizerName } from '../../src/core/api.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  operatorKubeconfig,
  startOperatorProcess,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let operator: OperatorProcess;
let caddy: CaddyProcess;
let ns: string;
let saKubeconfig: string;

beforeAll(async () => {
  installCrds(stack);
  // With a gateway, so that the finalizer's permissions are exercised too.
  caddy = await CaddyProcess.create(stack);
  saKubeconfig = operatorKubeconfig(stack);
  ns = k.createNamespace('rbac');
  operator = startOperatorProcess(
    stack,
    { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `mmo-${randomUUID()}`, ...caddy.operatorEnv },
    'rbac',
  );
});

afterAll(async () => {
  await operator?.stop();
  await caddy?.stop();
});

describe('the operator as its own ServiceAccount under deploy/operator/rbac.yaml', () => {
  it('is not an administrator', () => {
    expect(() => kubectlRun({ ...stack, kubeconfig: saKubeconfig }, ['-n', ns, 'get', 'secrets'])).toThrow(/forbidden/);
  });

  it('reconciles a model to Ready, publishes it and runs its finalizer on deletion', async () => {
    k.apply(machineModel(ns, 'least-privilege', { minReplicas: 1, maxReplicas: 3 }));
    const mm = await eventually(
      'Ready',
      () => {
        const m = k.get('machinemodel', ns, 'least-privilege');
        return m?.status?.phase === 'Ready' ? m : undefined;
      },
      60_000,
    );
    expect(mm.metadata.finalizers).toContain(finalizerName);
    expect(conditionOf(mm, 'GatewayRegistered')?.status).toBe('True');
    expect(k.get('horizontalpodautoscaler', ns, 'least-privilege').metadata.ownerReferences[0].uid).toBe(
      mm.metadata.uid,
    );
    // The model's Events only: the apiserver's ClusterIP repair loop may warn on a Service it raced (seen in CI).
    const events = k
      .list('events', ns)
      .filter((e) => e.involvedObject.kind === 'MachineModel' && e.involvedObject.name === 'least-privilege');
    expect(events.map((e) => e.reason)).toContain('Created');
    // A forbidden call would have surfaced as a Failed phase and a Warning on the way to Ready.
    expect(events.filter((e) => e.type === 'Warning').map((e) => `${e.reason}: ${e.message}`)).toEqual([]);
    k.kubectl('-n', ns, 'patch', 'mm', 'least-privilege', '--type=merge', '-p', '{"spec":{"maxReplicas":1}}');
    await eventually('HPA deleted', () =>
      k.get('horizontalpodautoscaler', ns, 'least-privilege') === undefined ? true : undefined,
    );
    k.kubectl('-n', ns, 'delete', 'mm', 'least-privilege', '--wait=true', '--timeout=60s');
    expect(k.get('machinemodel', ns, 'least-privilege')).toBeUndefined();
  });

  it('rolls out a canary and removes it afterwards: no canary Deployment or Service is left running', async () => {
    // Under the RBAC of 0842e78 this rollout ended Failed, reason Forbidden ("cannot delete"), its canary left behind.
    const plan = { strategy: 'Canary' as const, steps: [{ weight: 50, pause: '2s' }] };
    const status = () => k.get('machinemodel', ns, 'canaried')?.status;
    k.apply(machineModel(ns, 'canaried', { image: 'registry.example/m:1', replicas: 1, rollout: plan }));
    await eventually('v1 Ready', () => (status()?.phase === 'Ready' ? true : undefined), 60_000);
    k.apply(machineModel(ns, 'canaried', { image: 'registry.example/m:2', replicas: 1, rollout: plan }));
    await eventually(
      'v2 promoted and the canary gone',
      () =>
        status()?.rollout?.phase === 'Promoted' &&
        status()?.phase === 'Ready' &&
        !k.get('deployment', ns, 'canaried-canary') &&
        !k.get('service', ns, 'canaried-canary')
          ? true
          : undefined,
      90_000,
    );
    expect(k.get('deployment', ns, 'canaried').spec.template.spec.containers[0].image).toBe('registry.example/m:2');
    const warnings = k
      .list('events', ns)
      .filter((e) => e.involvedObject.kind === 'MachineModel' && e.involvedObject.name === 'canaried')
      .filter((e) => e.type === 'Warning');
    expect(warnings.map((e) => `${e.reason}: ${e.message}`)).toEqual([]);
  }, 120_000);

  it('may count a repeated Event on the existing one', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(saKubeconfig);
    const kube = new KubeClient(kc);
    k.apply(machineModel(ns, 'eventful'));
    const mm = await eventually<any>('eventful created', () => k.get('machinemodel', ns, 'eventful'));
    const ref = { namespace: ns, name: 'eventful', uid: mm.metadata.uid as string };
    for (let i = 0; i < 3; i++) await recordEvent(kube, ref, 'Warning', 'Tested', 'the same message each time');
    const events = k.list('events', ns).filter((e) => e.involvedObject.name === 'eventful' && e.reason === 'Tested');
    expect(events.map((e) => e.count)).toEqual([3]);
  });

  it('may list Pods, so a model no node can place is reported as Pending', async () => {
    k.apply(machineModel(ns, 'unplaceable', { resources: { cpu: '100m', memory: '128Mi', gpu: 32 } }));
    const mm = await eventually(
      'Pending',
      () => {
        const m = k.get('machinemodel', ns, 'unplaceable');
        return m?.status?.phase === 'Pending' ? m : undefined;
      },
      40_000,
    );
    expect(conditionOf(mm, 'Ready')?.reason).toBe('Unschedulable');
    k.kubectl('-n', ns, 'delete', 'mm', 'unplaceable', '--wait=true', '--timeout=60s');
  });
});
