// Models on the stack's real node (kubelet, containerd, runc): the reference model server answers a
// prediction through Caddy, and every way a container fails is reported at once, then recovers.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { request } from '../../activities/gateway/http.js';
import { misbehavingModelImage } from '../../tools/images/catalog.js';
import { kubectlRun } from '../../tools/local-stack/stack.js';
import { realNodeName } from '../../tools/local-stack/real-node.js';
import { digitsRequest, sampleDigits } from '../../tools/local-stack/sample-digits.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { eventually } from '../support/eventually.js';
import { mmctlFor } from '../support/mmctl.js';
import { phaseAndReadyOf } from '../support/cluster.js';
import { machineModel } from '../support/models.js';
import { installCrds, startOperatorProcess, type OperatorProcess } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
let operator: OperatorProcess;
let caddy: CaddyProcess;
let ns: string;
const taskQueue = `mmo-${randomUUID()}`;
const mmctl = mmctlFor(stack, taskQueue);

const phaseAndReady = (name: string) => phaseAndReadyOf(k.get('machinemodel', ns, name));

const warningEvents = (name: string) =>
  JSON.parse(
    kubectlRun(stack, [
      'get',
      'events',
      '-n',
      ns,
      '--field-selector',
      `involvedObject.kind=MachineModel,involvedObject.name=${name},type=Warning`,
      '-o',
      'json',
    ]),
  ).items as { reason: string; message: string }[];

describe.skipIf(!stack.realNode)(`models on the real node (${stack.simulatedOnly ?? realNodeName})`, () => {
  beforeAll(async () => {
    installCrds(stack);
    caddy = await CaddyProcess.create(stack);
    ns = k.createRealNodeNamespace('real');
    // Every model here runs as the restricted Pod Security Standard asks, the reference server included.
    kubectlRun(stack, ['label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted']);
    operator = startOperatorProcess(
      stack,
      {
        MMO_NAMESPACES: ns,
        MMO_TASK_QUEUE: taskQueue,
        ...caddy.operatorEnv,
        MMO_CADDY_UPSTREAM: 'cluster-ip',
      },
      'real-node',
    );
  });

  afterAll(async () => {
    await operator?.stop();
    await caddy?.stop();
    if (ns) kubectlRun(stack, ['delete', 'namespace', ns, '--wait=false']);
  });

  it('serves the seed example through the gateway: a real prediction from the reference model server', async () => {
    // The seed example as written (its image is the reference server's other name), in this namespace.
    k.apply(
      machineModel(ns, 'image-classifier-v1', {
        image: 'my-registry/image-classifier:v1.2.0',
        modelPath: '/techblog/en/app/models/image_classifier.pb',
        resources: { cpu: '500m', memory: '1Gi', gpu: 1 },
        minReplicas: 2,
        maxReplicas: 5,
        endpointType: 'REST',
      }),
    );
    const url = await eventually(
      'published and Ready',
      () => {
        const mm = k.get('machinemodel', ns, 'image-classifier-v1');
        return mm?.status?.phase === 'Ready' ? (mm.status.gatewayURL as string | undefined) : undefined;
      },
      180_000,
    );
    const pods = k.list<{
      spec: { nodeName: string };
      status: { containerStatuses: { ready: boolean; image: string }[] };
    }>('pods', ns, 'app.kubernetes.io/instance=image-classifier-v1');
    expect(pods.map((p) => p.spec.nodeName)).toEqual([realNodeName, realNodeName]);
    expect(pods.every((p) => p.status.containerStatuses[0]!.ready)).toBe(true);
    expect(pods[0]!.status.containerStatuses[0]!.image).toBe('docker.io/my-registry/image-classifier:v1.2.0');

    const infer = `${url}/v2/models/image-classifier-v1/infer`;
    const res = await request('POST', infer, digitsRequest([sampleDigits.zero, sampleDigits.one]));
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({
      model_name: 'image-classifier-v1',
      outputs: [{ name: 'label', datatype: 'INT64', shape: [2], data: [0, 1] }],
    });
  }, 240_000);

  it('reports an image that does not exist at once, with the runtime message, and recovers when the image is fixed', async () => {
    k.apply(machineModel(ns, 'missing-image', { image: 'localhost/machinemodel/no-such-model:1', replicas: 1 }));
    const failed = await eventually('Failed for the image', () => {
      const s = phaseAndReady('missing-image');
      return s.phase === 'Failed' && s.reason === 'ImagePullFailed' ? s : undefined;
    });
    expect(failed.message).toContain('image localhost/machinemodel/no-such-model:1 cannot be pulled');
    expect(failed.message).toMatch(/failed to pull and unpack image|Back-off pulling image/);
    expect(conditionOf(k.get('machinemodel', ns, 'missing-image'), 'Stalled')?.status).toBe('True');
    expect(warningEvents('missing-image').map((e) => e.reason)).toContain('ImagePullFailed');

    k.apply(machineModel(ns, 'missing-image', { image: misbehavingModelImage.ref, replicas: 1 }));
    await eventually('Ready after the fix', () =>
      phaseAndReady('missing-image').phase === 'Ready' ? true : undefined,
    );
  });

  it('reports a crash loop with the exit code, and an out-of-memory kill with the limit', async () => {
    k.apply(machineModel(ns, 'crashes', { image: misbehavingModelImage.ref, modelPath: '/crash', replicas: 1 }));
    k.apply(
      machineModel(ns, 'oom', {
        image: misbehavingModelImage.ref,
        modelPath: '/oom',
        replicas: 1,
        resources: { cpu: '100m', memory: '48Mi' },
      }),
    );
    const crash = await eventually('crash reported', () => {
      const s = phaseAndReady('crashes');
      return s.phase === 'Failed' && s.reason === 'CrashLoopBackOff' ? s : undefined;
    });
    expect(crash.message).toContain('last ended with Error (exit code 3)');
    // The same words in `mmctl status` (the last round's conditions) and in the round's story, which
    // `mmctl history` reads from the step summaries the Web UI shows.
    expect(mmctl('status', `${ns}/crashes`)).toMatch(/Ready=False CrashLoopBackOff: .*exit code 3/);
    expect(mmctl('history', `${ns}/crashes`, '--rounds', '20')).toMatch(
      /saw +0 of 1 ready, 1 updated · CrashLoopBackOff: container model keeps crashing .*last ended with Error \(exit code 3\)/,
    );
    const oom = await eventually('OOMKilled reported', () => {
      const s = phaseAndReady('oom');
      return s.phase === 'Failed' && s.message.includes('OOMKilled') ? s : undefined;
    });
    expect(oom.message).toContain('more memory than its limit of 48Mi (OOMKilled)');
    expect(warningEvents('oom').map((e) => e.reason)).toContain('CrashLoopBackOff');

    // Fixed by the spec: a model path the server can load.
    k.apply(machineModel(ns, 'crashes', { image: misbehavingModelImage.ref, modelPath: '/fine', replicas: 1 }));
    await eventually('Ready after the fix', () => (phaseAndReady('crashes').phase === 'Ready' ? true : undefined));
  });

  it("keeps a model whose probe fails Deploying, with the probe's message, and one that loads slowly says so until it is Ready", async () => {
    k.apply(
      machineModel(ns, 'never-ready', { image: misbehavingModelImage.ref, modelPath: '/never-ready', replicas: 1 }),
    );
    k.apply(machineModel(ns, 'slow', { image: misbehavingModelImage.ref, modelPath: '/slow-40', replicas: 1 }));
    // The slow one first: it is Ready 40 s after it starts, so its loading is seen early or never.
    const slow = await eventually('slow load shown', () => {
      const s = phaseAndReady('slow');
      return s.reason === 'ContainerNotReady' ? s : undefined;
    });
    expect(slow.phase).toBe('Deploying');
    expect(slow.message).toContain('running but not ready');
    const never = await eventually(
      'probe message shown',
      () => {
        const s = phaseAndReady('never-ready');
        // The kubelet's probe failures are watched: each new message (first "connection refused" while
        // the server starts, then its 503) wakes the model, whose Ready condition quotes the latest.
        return s.reason === 'ContainerNotReady' && s.message.includes('Readiness probe failed') ? s : undefined;
      },
      120_000,
    );
    expect(never.phase).toBe('Deploying');
    await eventually('slow one Ready', () => (phaseAndReady('slow').phase === 'Ready' ? true : undefined), 120_000);
    expect(phaseAndReady('never-ready').phase).toBe('Deploying');
  }, 300_000);
});
