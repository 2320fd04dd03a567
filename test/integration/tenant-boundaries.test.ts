// Two tenants' namespaces, one Caddy, one Temporal, the operator as its ServiceAccount: what one tenant
// (or any Pod that reaches Temporal) tries against the other. Each case was seen to succeed at 0842e78.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CaddyDriver } from '../../activities/gateway/caddy-driver.js';
import { request } from '../../activities/gateway/http.js';
import {
  delegatedHostnamesAnnotation,
  delegatedPrefixesAnnotation,
  type RouteSpec,
} from '../../src/core/route-rules.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { workflowIdFor } from '../../src/core/api.js';
import { execFileSync } from 'node:child_process';
import { binaryPath, temporalCli } from '../../tools/local-stack/components.js';
import { stateQuery } from '../../workflows/definitions.js';
import { abortUpdate, rolloutReportSignal, type RolloutReport } from '../../workflows/rollout-definitions.js';
import { machineModel } from '../support/models.js';
import {
  installCrds,
  startOperatorProcess,
  temporalClient,
  type OperatorProcess,
} from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let caddy: CaddyProcess;
let operator: OperatorProcess;
let a: string;
let b: string;

beforeAll(async () => {
  installCrds(stack);
  caddy = await CaddyProcess.create(stack);
  a = k.createNamespace('tenant-a');
  b = k.createNamespace('tenant-b');
  operator = startOperatorProcess(
    stack,
    { MMO_NAMESPACES: `${a},${b}`, MMO_TASK_QUEUE: taskQueue, ...caddy.operatorEnv, MMO_GATEWAY_SWEEP_SECONDS: '3' },
    'tenants',
  );
});

afterAll(async () => {
  await operator?.stop();
  await caddy?.stop();
});

const gateway = (ns: string, name: string) => conditionOf(k.get('machinemodel', ns, name), 'GatewayRegistered');

/** The model's GatewayRegistered condition once it has one with `status`. */
function settled(ns: string, name: string, status: 'True' | 'False') {
  return eventually<any>(
    `${ns}/${name} GatewayRegistered=${status}`,
    () => (gateway(ns, name)?.status === status ? gateway(ns, name) : undefined),
    60_000,
  );
}

describe("one tenant cannot take another's URLs on the shared gateway", () => {
  it("refuses a prefix in another namespace's space, the root, or a capitalised /Models (seen: it answered every tenant's requests)", async () => {
    k.apply(machineModel(b, 'victim'));
    await settled(b, 'victim', 'True');
    for (const [name, pathPrefix] of [
      ['late', `/models/${b}/late`],
      ['root', '/'],
      ['capital', '/Models'],
    ] as const) {
      k.apply(machineModel(a, name, { gateway: { pathPrefix } }));
      const c = await settled(a, name, 'False');
      expect(c.reason, pathPrefix).toBe('PathNotAllowed');
      expect(c.message).toContain(`outside /models/${a}/`);
    }
    // B's own name, taken first by A at 0842e78, is B's.
    k.apply(machineModel(b, 'late'));
    expect((await settled(b, 'late', 'True')).reason).toBe('Registered');
    const prefixes = (await caddy.routes()).map((r) => r.match?.[0]?.path?.[0]).filter(Boolean);
    expect(prefixes.sort()).toEqual([`/models/${b}/late`, `/models/${b}/victim`]);
  });

  it('publishes what an administrator delegated on the Namespace, once delegated, and compares prefixes case-blind', async () => {
    k.apply(machineModel(a, 'api', { gateway: { pathPrefix: `/api/${a}/clf` } }));
    expect((await settled(a, 'api', 'False')).reason).toBe('PathNotAllowed');
    k.kubectl('annotate', 'namespace', a, `${delegatedPrefixesAnnotation}=/api/${a}`);
    // The janitor's next sweep wakes the refused model, which reads its Namespace again.
    expect((await settled(a, 'api', 'True')).reason).toBe('Registered');
    k.apply(machineModel(a, 'api-shadow', { gateway: { pathPrefix: `/API/${a}/clf/v2` } }));
    const c = await settled(a, 'api-shadow', 'False');
    expect(c.reason).toBe('PathConflict');
    expect(c.message).toContain(`MachineModel ${a}/api`);
  });

  it('takes hostnames only from the allow-list, and the shared listener keeps speaking plain HTTP (seen: 400, TLS)', async () => {
    k.apply(machineModel(a, 'hosted', { gateway: { hostnames: ['models.acc.example'] } }));
    expect((await settled(a, 'hosted', 'False')).reason).toBe('HostnameNotAllowed');
    k.kubectl('annotate', 'namespace', a, `${delegatedHostnamesAnnotation}=*.acc.example`);
    expect((await settled(a, 'hosted', 'True')).reason).toBe('Registered');
    const https = await request('GET', `${caddy.adminURL}/config/apps/http/servers/machinemodels/automatic_https`);
    expect(JSON.parse(https.body)).toMatchObject({ disable: true });
    // The other tenant's request, in plain HTTP: the in-cluster upstream cannot be dialled from here (502), no TLS (400).
    expect((await fetch(`${caddy.publicURL}/models/${b}/victim/v1/predict`)).status).toBe(502);
    expect((await fetch(`${caddy.publicURL}/models/${b}/nobody`)).status).toBe(404);
  });
});

describe('a namespace that enforces the restricted Pod Security Standard', () => {
  it("admits the model's Pods: the model gets Ready (seen: every Pod refused, never Ready)", async () => {
    const ns = k.createNamespace('restricted');
    k.kubectl('label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted');
    const own = startOperatorProcess(
      stack,
      { MMO_NAMESPACES: ns, MMO_TASK_QUEUE: `mmo-${randomUUID()}` },
      'restricted',
    );
    try {
      k.apply(machineModel(ns, 'hardened', { replicas: 2 }));
      await eventually('Ready', () => (k.phaseOf(ns, 'hardened') === 'Ready' ? true : undefined), 60_000);
      expect(k.list('pods', ns).map((p) => p.spec.automountServiceAccountToken)).toEqual([false, false]);
    } finally {
      await own.stop();
      k.kubectl('delete', 'namespace', ns, '--wait=false');
    }
  });
});

describe('a rollout is not a way around the checks', () => {
  it("splits only a route the model's round published: a refused prefix stays off the gateway through a whole rollout", async () => {
    const rollout = { strategy: 'Canary' as const, steps: [{ weight: 50 }] };
    const squat = { pathPrefix: `/models/${b}/rolled` };
    k.apply(machineModel(a, 'rolled', { image: 'registry.example/m:1', rollout, gateway: squat }));
    expect((await settled(a, 'rolled', 'False')).reason).toBe('PathNotAllowed');
    k.apply(machineModel(a, 'rolled', { image: 'registry.example/m:2', rollout, gateway: squat }));
    await eventually(
      'v2 promoted, the canary gone',
      () => {
        const m = k.get('machinemodel', a, 'rolled');
        return m?.status?.rollout?.phase === 'Promoted' && !k.get('deployment', a, 'rolled-canary') ? true : undefined;
      },
      90_000,
    );
    const prefixes = (await caddy.routes()).map((r) => r.match?.[0]?.path?.[0]);
    expect(prefixes).not.toContain(squat.pathPrefix);
    expect(gateway(a, 'rolled')?.reason).toBe('PathNotAllowed');
  }, 120_000);
});

describe("Caddy's route order", () => {
  it('answers a request by its most specific prefix, whichever route came first', async () => {
    // Two real upstreams, and the driver alone: a broad route published after a narrow one.
    const servers = await Promise.all(
      ['narrow', 'broad'].map(
        (who) =>
          new Promise<http.Server>((resolve) => {
            const s = http.createServer((_req, res) => res.end(who));
            s.listen(0, '127.0.0.1', () => resolve(s));
          }),
      ),
    );
    const driver = new CaddyDriver({
      adminURL: caddy.adminURL,
      server: 'machinemodels',
      listen: caddy.operatorEnv.MMO_CADDY_LISTEN!,
      publicURL: caddy.publicURL,
    });
    const route = (name: string, pathPrefix: string, server: http.Server): RouteSpec => ({
      // Not an id of the operator's (its janitor would remove a route whose model does not exist).
      id: `order-test-${name}`,
      namespace: 'order',
      name,
      uid: 'u',
      pathPrefix,
      hostnames: [],
      service: { name, namespace: 'order', port: (server.address() as AddressInfo).port, host: '127.0.0.1' },
      protocol: 'http',
    });
    const narrow = route('narrow', '/order/team/victim', servers[0]!);
    const broad = route('broad', '/ORDER', servers[1]!);
    try {
      await driver.put(narrow);
      await driver.put(broad);
      expect(await (await fetch(`${caddy.publicURL}/order/team/victim/x`)).text()).toBe('narrow');
      expect(await (await fetch(`${caddy.publicURL}/order/other`)).text()).toBe('broad');
    } finally {
      for (const r of [narrow, broad]) await driver.remove(r.id, r);
      for (const s of servers) s.close();
    }
  });
});

describe('Temporal is not a way in', () => {
  it("ends a rollout started by hand on the operator's task queue with an image no MachineModel names, and ignores a forged report", async () => {
    const plan = { strategy: 'Canary' as const, steps: [{ weight: 50 }] };
    k.apply(machineModel(b, 'target', { rollout: plan }));
    const mm = await eventually<any>('target Ready', () => {
      const m = k.get('machinemodel', b, 'target');
      return m?.status?.phase === 'Ready' ? m : undefined;
    });
    const ref = { namespace: b, name: 'target', uid: mm.metadata.uid as string };
    const stable = { image: mm.spec.image as string, modelPath: mm.spec.modelPath as string };
    const client = await temporalClient(stack);
    const handle = await client.workflow.start('canaryRolloutWorkflow', {
      taskQueue,
      workflowId: `forged-${randomUUID()}`,
      args: [
        {
          ref,
          revision: { image: 'evil.example/miner:1', modelPath: stable.modelPath },
          stable,
          plan,
          stableReplicas: 1,
        },
      ],
    });
    try {
      // A rollout writes nothing, and one that is no model workflow's child ends at once.
      await expect(handle.result()).rejects.toThrow();
      const failure = await handle.result().catch((err: { cause?: Error }) => err.cause?.message);
      expect(failure).toContain("runs only as its model's workflow's child");
      // A forged report to the model's workflow, asking a share for that image: no rollout of it runs there.
      await client.workflow.getHandle(workflowIdFor(b, 'target')).signal(rolloutReportSignal, {
        view: {
          revision: { image: 'evil.example/miner:1', modelPath: stable.modelPath },
          stable,
          phase: 'Progressing',
          step: 1,
          steps: 1,
          weight: 50,
          verdicts: [],
        },
        want: { step: 0, replicas: 1, weight: 50, seq: 1 },
      });
      await sleep(3_000);
      const images = k
        .list('deployments', b)
        .flatMap((d) => d.spec.template.spec.containers.map((c: { image: string }) => c.image));
      expect(images).not.toContain('evil.example/miner:1');
      expect(k.get('deployment', b, 'target-canary')).toBeUndefined();
      expect(k.get('machinemodel', b, 'target')?.status?.rollout).toBeUndefined();
    } finally {
      await client.connection.close();
    }
  });
  it('ignores a report forged with the temporal CLI for a rollout that ended, even naming its own run: the aborted revision never becomes stable', async () => {
    const plan = { strategy: 'Canary' as const, steps: [{ weight: 20, pause: '1h' }] };
    k.apply(machineModel(b, 'aborted', { rollout: plan }));
    await eventually('aborted Ready', () => k.get('machinemodel', b, 'aborted')?.status?.phase === 'Ready');
    const v2 = 'registry.example.com/models/classifier:v2';
    k.apply(machineModel(b, 'aborted', { rollout: plan, image: v2 }));
    const client = await temporalClient(stack);
    try {
      const model = client.workflow.getHandle(workflowIdFor(b, 'aborted'));
      const { rollout } = await eventually('the rollout recorded', async () => {
        const s = await model.query(stateQuery);
        return s.rollout?.running && s.rollout.runId ? s : undefined;
      });
      await client.workflow.getHandle(rollout!.workflowId).executeUpdate(abortUpdate, { args: [{ by: 'test' }] });
      await eventually(
        'status says Aborted',
        () => k.get('machinemodel', b, 'aborted')?.status?.rollout?.phase === 'Aborted',
      );
      // The rounds the abort itself brings (the canary removed, its watch events) are over first.
      const rounds = await settledRounds(() => model.query(stateQuery));
      // What someone who read the histories could send: the rollout's own workflow id and run, Promoted.
      const view = { ...rollout!.view!, phase: 'Promoted' as const };
      const report: RolloutReport = {
        from: { workflowId: rollout!.workflowId, firstRunId: rollout!.runId! },
        view,
        result: { outcome: 'Promoted', revision: rollout!.revision, message: 'forged', view },
      };
      execFileSync(binaryPath(temporalCli), [
        'workflow',
        'signal',
        '--address',
        stack.temporalAddress,
        '--namespace',
        stack.temporalNamespace,
        '--workflow-id',
        workflowIdFor(b, 'aborted'),
        '--name',
        'rolloutReport',
        '--input',
        JSON.stringify(report),
      ]);
      await eventually('the signal in the history', async () => (await model.query(stateQuery)).signals > 0);
      await sleep(3_000);
      const after = await model.query(stateQuery);
      // Taken, it would have woken a round that moves the stable Deployment to v2.
      expect(after.rounds).toBe(rounds);
      expect(after.rollout).toMatchObject({ running: false, result: { outcome: 'Aborted' } });
      expect(k.get('deployment', b, 'aborted')?.spec.template.spec.containers[0].image).not.toBe(v2);
      expect(k.get('machinemodel', b, 'aborted')?.status?.rollout?.phase).toBe('Aborted');
    } finally {
      await client.connection.close();
    }
  });
});

/** The model's round count once it has not moved for 5 s. */
async function settledRounds(state: () => Promise<{ rounds: number }>): Promise<number> {
  let last = -1;
  for (;;) {
    const { rounds } = await state();
    if (rounds === last) return rounds;
    last = rounds;
    await sleep(5_000);
  }
}
