// Models whose weights are in object storage (issues 40 and 55), on the real node, from the stack's
// real S3 store (SeaweedFS), in namespaces that enforce the `restricted` Pod Security Standard: the
// model cache's CSI plugin (the install's DaemonSet, deploy/model-cache) fetches and verifies the
// artifact once per node and mounts it read-only; the reference server loads it and answers through
// the gateway. A second replica, a second tenant and a rollback fetch nothing; a tenant the store
// refuses is refused though the bytes are on the node; a refused fetch, a store that streams without
// end and a namespace over its quota are each in the model's status within a minute; a plugin and an
// operator killed mid-fetch resume; a Pod the namespace refuses says so; and the store's keys appear
// in no history, Event or log line.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { request } from '../../activities/gateway/http.js';
import { modelServerImage } from '../../tools/images/catalog.js';
import {
  putObject,
  readCredentials,
  sampleModelKey,
  storeSecret,
  type ObjectStoreInfo,
} from '../../tools/local-stack/object-store.js';
import { realNodeName } from '../../tools/local-stack/real-node.js';
import { digitsRequest, sampleDigits } from '../../tools/local-stack/sample-digits.js';
import { ensureModelCache, modelCacheNamespace, modelCachePods } from '../../tools/local-stack/model-cache.js';
import { kubectlRun, startStackObjectStore } from '../../tools/local-stack/stack.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { CountingProxy } from '../support/counting-proxy.js';
import { startEndlessStore } from '../support/endless-store.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { mmctlFor } from '../support/mmctl.js';
import { phaseAndReadyOf } from '../support/cluster.js';
import { machineModel } from '../support/models.js';
import { installCrds, startOperatorProcess, type OperatorProcess } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let operator: OperatorProcess;
let caddy: CaddyProcess;
let store: ObjectStoreInfo;
/** The store as the plugin reaches it, through a proxy on the node's IP that counts what it sends. */
let counted: CountingProxy;
let ns: string;
/** Tenants beside `ns`: one that shares an object, one with wrong keys, one with a quota. */
let other: string;
let third: string;
let quotaNs: string;

const mmctl = mmctlFor(stack, taskQueue);

const stored = (name: string, storageUri: string, extra: object = {}, namespace = ns) =>
  machineModel(namespace, name, {
    image: modelServerImage.ref,
    modelPath: undefined,
    storageUri,
    storageSecret: 'store',
    resources: { cpu: '250m', memory: '256Mi' },
    replicas: 1,
    ...extra,
  });

const phaseAndReady = (name: string, namespace = ns) => phaseAndReadyOf(k.get('machinemodel', namespace, name));

interface PodView {
  metadata: { name: string; creationTimestamp: string; deletionTimestamp?: string };
  spec: {
    nodeName?: string;
    initContainers?: unknown[];
    volumes?: Record<string, unknown>[];
    securityContext?: { runAsNonRoot?: boolean };
    containers: { env: { name: string; value: string }[]; securityContext?: { runAsUser?: number } }[];
  };
}

const digitsBytes = () => readFileSync(path.join(stack.stateDir, 'object-store', 'digits.joblib'));

/**
 * The digits model followed by `mib` MiB of random bytes: the server's pickle load stops at its end,
 * so it is a model of that size to fetch that loads as fast as the small one.
 */
const paddedModel = (mib: number) => Buffer.concat([digitsBytes(), randomBytes(mib * 2 ** 20)]);

function startOperator(): OperatorProcess {
  return startOperatorProcess(
    stack,
    {
      MMO_NAMESPACES: [ns, other, third, quotaNs].join(','),
      MMO_TASK_QUEUE: taskQueue,
      ...caddy.operatorEnv,
      MMO_CADDY_UPSTREAM: 'cluster-ip',
    },
    'model-storage',
  );
}

/** A namespace of the real node that enforces the `restricted` Pod Security Standard, as tenants' do. */
function restrictedNamespace(prefix: string): string {
  const name = k.createRealNodeNamespace(prefix);
  kubectlRun(stack, ['label', 'namespace', name, 'pod-security.kubernetes.io/enforce=restricted']);
  return name;
}

/** The plugin's log lines (JSON), from its container now and the one before a restart. */
function pluginLog(): string {
  const read = (previous: boolean) => {
    try {
      return kubectlRun(stack, [
        'logs',
        '-n',
        modelCacheNamespace,
        'daemonset/model-cache',
        ...(previous ? ['--previous'] : []),
      ]);
    } catch {
      return '';
    }
  };
  return read(true) + read(false);
}

/** Deletes models and waits until their Pods are gone: the real node has room for a few at a time. */
async function remove(...names: string[]): Promise<void> {
  for (const name of names) kubectlRun(stack, ['delete', 'machinemodel', '-n', ns, name, '--wait=false']);
  await eventually(
    `${names.join(', ')} gone`,
    () =>
      names.every((n) => k.list<PodView>('pods', ns, `app.kubernetes.io/instance=${n}`).length === 0)
        ? true
        : undefined,
    120_000,
  );
}

async function predict(name: string, namespace = ns): Promise<unknown> {
  const url = k.get('machinemodel', namespace, name)?.status?.gatewayURL as string;
  const res = await request(
    'POST',
    `${url}/v2/models/${name}/infer`,
    digitsRequest([sampleDigits.zero, sampleDigits.one]),
  );
  return res.status === 200 ? JSON.parse(res.body) : undefined;
}

const ready = (name: string, namespace = ns) =>
  eventually(
    `${namespace}/${name} Ready`,
    () => (phaseAndReady(name, namespace).phase === 'Ready' ? true : undefined),
    240_000,
  );

/** What a person would look at when a model does not say what it should: its status, Pods' Events, the plugin's log. */
function diagnose(name: string): string {
  const events = kubectlRun(stack, ['get', 'events', '-n', ns, '--field-selector', 'involvedObject.kind=Pod']);
  return [
    JSON.stringify(phaseAndReady(name)),
    kubectlRun(stack, ['get', 'pods', '-n', ns, '-o', 'wide']),
    events
      .split('\n')
      .filter((l) => l.includes(name))
      .slice(-15)
      .join('\n'),
    pluginLog().split('\n').slice(-15).join('\n'),
  ].join('\n');
}

/** Waits until the model's status says `reason` (within `ms` of now), and returns what it says. */
async function saying(name: string, reason: string, ms = 60_000) {
  const since = Date.now();
  const s = await eventually(
    `${name}: ${reason}`,
    () => {
      const r = phaseAndReady(name);
      return r.reason === reason ? r : undefined;
    },
    ms,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${diagnose(name)}`);
  });
  console.log(`${name}: ${reason} ${Date.now() - since} ms after the apply: ${s.message}`);
  return s;
}

describe.skipIf(!stack.realNode)(
  `models from object storage on the real node (${stack.simulatedOnly ?? realNodeName})`,
  () => {
    beforeAll(async () => {
      store = await startStackObjectStore(stack);
      await ensureModelCache(stack, (l) => console.log(l));
      counted = await CountingProxy.start(store.endpoint, stack.realNode!.nodeIp);
      installCrds(stack);
      caddy = await CaddyProcess.create(stack);
      ns = restrictedNamespace('storage');
      other = restrictedNamespace('storage-b');
      third = restrictedNamespace('storage-c');
      quotaNs = restrictedNamespace('storage-quota');
      k.apply(storeSecret({ ...store, podEndpoint: counted.endpoint }, ns, 'store'));
      operator = startOperator();
    }, 900_000);

    afterAll(async () => {
      await operator?.stop();
      await caddy?.stop();
      await counted?.stop();
      for (const n of [ns, other, third, quotaNs]) if (n) kubectlRun(stack, ['delete', 'namespace', n, '--wait=false']);
    });

    it('serves a model from s3:// in a restricted namespace: no init container, no hostPath, no root; a second replica fetches nothing', async () => {
      const sample = store.sampleModel!;
      const applied = Date.now();
      const before = counted.bytes;
      k.apply(stored('digits', sample.uri, { sha256: sample.sha256 }));
      await ready('digits');
      console.log(`apply to Ready, cold (the node fetches ${sample.size} bytes): ${Date.now() - applied} ms`);
      const answer = await eventually('a prediction through the gateway', () => predict('digits'), 60_000);
      expect(answer).toMatchObject({ model_name: 'digits', outputs: [{ name: 'label', data: [0, 1] }] });
      const [pod] = k.list<PodView>('pods', ns, 'app.kubernetes.io/instance=digits');
      expect(pod!.spec.initContainers).toBeUndefined();
      expect(JSON.stringify(pod!.spec.volumes)).not.toContain('hostPath');
      expect(pod!.spec.volumes).toContainEqual(
        expect.objectContaining({ csi: expect.objectContaining({ driver: 'model-cache.stable.example.com' }) }),
      );
      expect(pod!.spec.securityContext?.runAsNonRoot).toBe(true);
      const fetched = counted.bytes - before;
      expect(fetched).toBeGreaterThanOrEqual(sample.size);

      kubectlRun(stack, ['patch', 'machinemodel', '-n', ns, 'digits', '--type=merge', '-p', '{"spec":{"replicas":2}}']);
      await eventually(
        'two replicas ready',
        () => (k.get('machinemodel', ns, 'digits')?.status?.ready === '2/2' ? true : undefined),
        120_000,
      );
      // The second Pod's publish asks the store one byte (is it still served to this Secret?), no more.
      expect(counted.bytes - before - fetched).toBeLessThan(1024);
      const pods = k.list<PodView>('pods', ns, 'app.kubernetes.io/instance=digits');
      expect(new Set(pods.map((p) => p.spec.nodeName))).toEqual(new Set([realNodeName]));
    }, 360_000);

    it("shares one fetch between two tenants naming one object, and refuses a third with the store's 403", async () => {
      const bytes = paddedModel(8);
      const { uri, sha256 } = await putObject(store, 'shared/v1/digits.joblib', bytes);
      try {
        k.apply(storeSecret({ ...store, podEndpoint: counted.endpoint }, other, 'store'));
        k.apply(
          storeSecret({ ...store, podEndpoint: counted.endpoint }, third, 'store', {
            accessKeyId: 'NOTAKEY',
            secretAccessKey: 'not-a-secret',
          }),
        );
        const before = counted.bytes;
        k.apply(stored('shared', uri, { sha256 }));
        k.apply(stored('shared', uri, { sha256 }, other));
        await ready('shared');
        await ready('shared', other);
        const sent = counted.bytes - before;
        console.log(
          `two tenants, one ${bytes.length}-byte object: the store sent ${sent} bytes (${(sent / bytes.length).toFixed(4)}x)`,
        );
        expect(sent / bytes.length).toBeLessThanOrEqual(1.05);
        const applied = Date.now();
        k.apply(stored('shared', uri, { sha256 }, third));
        const refused = await eventually(
          'the third tenant refused',
          () => {
            const r = phaseAndReady('shared', third);
            return r.reason === 'ModelUnavailable' ? r : undefined;
          },
          60_000,
        );
        console.log(
          `wrong keys for a cached object: ModelUnavailable ${Date.now() - applied} ms after the apply: ${refused.message}`,
        );
        expect(refused.message).toMatch(/403/);
        expect(phaseAndReady('shared').phase).toBe('Ready');
        expect(await predict('shared', other)).toMatchObject({ outputs: [{ data: [0, 1] }] });
      } finally {
        for (const n of [other, third]) kubectlRun(stack, ['delete', 'machinemodel', '-n', n, '--all', '--wait=false']);
        await remove('shared');
      }
    }, 480_000);

    it('rolls forward to a new artifact and back to the cached one, which fetches nothing', async () => {
      const sample = store.sampleModel!;
      const bytes = paddedModel(1);
      const v2 = await putObject(store, 'digits/v2/digits.joblib', bytes);
      const onRevision = (key: string) => () =>
        phaseAndReady('digits').phase === 'Ready' &&
        k
          .list<PodView>('pods', ns, 'app.kubernetes.io/instance=digits')
          .every((p) => !p.metadata.deletionTimestamp && p.spec.containers[0]!.env.some((e) => e.value.includes(key)))
          ? true
          : undefined;
      let before = counted.bytes;
      k.apply(stored('digits', v2.uri, { sha256: v2.sha256, replicas: 1 }));
      await eventually('v2 rolled out', onRevision('digits/v2/'), 180_000);
      expect(counted.bytes - before).toBeGreaterThanOrEqual(bytes.length);
      before = counted.bytes;
      k.apply(stored('digits', sample.uri, { sha256: sample.sha256, replicas: 1 }));
      await eventually('back on v1', onRevision(sampleModelKey), 180_000);
      // The rollback: v1's artifact is in the node's cache; the store is asked a byte a Pod.
      expect(counted.bytes - before).toBeLessThan(1024);
      expect(await predict('digits')).toMatchObject({ outputs: [{ data: [0, 1] }] });
      await remove('digits');
    }, 540_000);

    it('reports a missing object, a forbidden one and a missing Secret as ModelUnavailable within 60 s of the apply', async () => {
      kubectlRun(stack, [
        'create',
        'secret',
        'generic',
        '-n',
        ns,
        'wrong-keys',
        `--from-literal=AWS_ENDPOINT_URL=${store.podEndpoint}`,
        '--from-literal=AWS_ACCESS_KEY_ID=NOTAKEY',
        '--from-literal=AWS_SECRET_ACCESS_KEY=not-a-secret',
      ]);
      for (const [name, spec, words] of [
        ['missing', stored('missing', 's3://models/digits/none/digits.joblib'), /404 NoSuchKey/],
        ['forbidden', stored('forbidden', store.sampleModel!.uri, { storageSecret: 'wrong-keys' }), /403/],
        [
          'no-secret',
          stored('no-secret', store.sampleModel!.uri, { storageSecret: 'absent' }),
          /secrets "absent" not found/,
        ],
      ] as const) {
        k.apply(spec);
        const s = await saying(name, 'ModelUnavailable');
        expect(s.phase).toBe('Failed');
        expect(s.message).toMatch(words);
        expect(conditionOf(k.get('machinemodel', ns, name), 'Stalled')).toMatchObject({
          status: 'True',
          reason: 'ModelUnavailable',
        });
      }
      // Fixed by itself once the object is there: the kubelet's next try fetches it.
      await putObject(store, 'digits/none/digits.joblib', digitsBytes());
      await eventually(
        'missing: Ready once the object is there',
        () => (phaseAndReady('missing').phase === 'Ready' ? true : undefined),
        360_000,
      );
      await remove('missing', 'forbidden', 'no-secret');
    }, 720_000);

    it('never serves an artifact with one byte flipped: never Ready, both sums in the message', async () => {
      const bytes = paddedModel(1);
      const { uri, sha256 } = await putObject(store, 'digits/flipped/digits.joblib', bytes);
      bytes[100]! ^= 0x01;
      const flipped = await putObject(store, 'digits/flipped/digits.joblib', bytes);
      k.apply(stored('flipped', uri, { sha256 }));
      const s = await saying('flipped', 'ModelUnavailable');
      expect(s.phase).toBe('Failed');
      expect(s.message).toContain(sha256);
      expect(s.message).toContain(flipped.sha256);
      expect(k.get('machinemodel', ns, 'flipped')?.status?.ready ?? '0/1').toBe('0/1');
      await remove('flipped');
    }, 180_000);

    it("refuses an artifact over the namespace's quota and a store that streams without end, each within 60 s, the cache under its cap", async () => {
      const endless = await startEndlessStore(stack.realNode!.nodeIp);
      const endlessUrl = endless.endpoint;
      try {
        kubectlRun(stack, ['annotate', 'namespace', quotaNs, 'stable.example.com/model-cache-quota=4Mi']);
        k.apply(storeSecret({ ...store, podEndpoint: counted.endpoint }, quotaNs, 'store'));
        const { uri } = await putObject(store, 'large/v1/digits.joblib', paddedModel(8));
        k.apply(stored('large', uri, {}, quotaNs));
        const quota = await eventually(
          'large: QuotaExceeded',
          () => {
            const r = phaseAndReady('large', quotaNs);
            return r.reason === 'QuotaExceeded' ? r : undefined;
          },
          60_000,
        );
        expect(quota.message).toMatch(/may hold 4\.0 MiB/);

        k.apply(storeSecret({ ...store, podEndpoint: endlessUrl }, ns, 'endless-store'));
        // What the cache holds on disk, sampled while the endless fetch runs.
        const cache = stack.realNode!.modelCacheDir;
        const onDisk = () =>
          ['entries', 'parts']
            .flatMap((f) =>
              readdirSync(path.join(cache, f)).map(
                (e) => statSync(path.join(cache, f, e), { throwIfNoEntry: false })?.size ?? 0,
              ),
            )
            .reduce((a, b) => a + b, 0);
        let most = 0;
        const sampler = setInterval(() => (most = Math.max(most, onDisk())), 100);
        k.apply(stored('endless', 's3://models/endless/digits.joblib', { storageSecret: 'endless-store' }));
        const full = await saying('endless', 'CacheFull').finally(() => clearInterval(sampler));
        expect(full.phase).toBe('Failed');
        console.log(`an endless store: at most ${most} bytes in the cache while it streamed (cap ${2 ** 30})`);
        expect(most).toBeGreaterThan(0);
        expect(most).toBeLessThanOrEqual(2 ** 30);
        // No other tenant's Pod was evicted for it.
        const evicted = kubectlRun(stack, ['get', 'events', '-A', '--field-selector', 'reason=Evicted', '-o', 'name']);
        expect(evicted.trim()).toBe('');
        await remove('endless');
      } finally {
        endless.stop();
        kubectlRun(stack, ['delete', 'machinemodel', '-n', quotaNs, '--all', '--wait=false']);
      }
    }, 240_000);

    it('says why Pods the namespace refuses are not created, within 60 s, and recovers once allowed', async () => {
      kubectlRun(stack, ['create', 'quota', 'no-pods', '-n', ns, '--hard=pods=0']);
      try {
        k.apply(stored('refused', store.sampleModel!.uri, { sha256: store.sampleModel!.sha256 }));
        const s = await saying('refused', 'PodsRefused');
        expect(s.phase).toBe('Failed');
        expect(s.message).toMatch(/exceeded quota: no-pods/);
        // And an Event on the model, in the apiserver's words.
        const events = kubectlRun(stack, [
          'get',
          'events',
          '-n',
          ns,
          '--field-selector',
          'involvedObject.kind=MachineModel,involvedObject.name=refused,reason=PodsRefused',
          '-o',
          'jsonpath={.items[*].message}',
        ]);
        expect(events).toMatch(/exceeded quota: no-pods/);
      } finally {
        kubectlRun(stack, ['delete', 'quota', 'no-pods', '-n', ns]);
      }
      await ready('refused');
      await remove('refused');
    }, 360_000);

    it('resumes a 256 MiB fetch over a SIGKILLed plugin and operator: at most 1.1x sent, progress in the status', async () => {
      const big = paddedModel(256);
      const { uri, sha256 } = await putObject(store, 'big/v1/digits.joblib', big);
      // A model that runs through the kill: its mount must outlive the plugin's restart.
      const sample = store.sampleModel!;
      k.apply(stored('steady', sample.uri, { sha256: sample.sha256 }));
      await ready('steady');
      // Slowed to 4 MiB/s, so that the plugin reports progress (every 10 s here) and the kill lands halfway.
      const before = counted.bytes;
      counted.throttle = 4 * 2 ** 20;
      try {
        k.apply(stored('big', uri, { sha256 }));
        const fetching = await saying('big', 'ModelFetching', 90_000);
        expect(fetching.phase).toBe('Deploying');
        expect(fetching.message).toMatch(
          /fetching the model into the node's cache \(1 pod\): [\d.]+ MiB of 256\.\d MiB, [\d.]+ MiB\/s/,
        );
        await eventually(
          'half the artifact sent',
          () => (counted.bytes - before >= big.length / 2 ? true : undefined),
          120_000,
        );
        await operator.kill();
        // This stack's plugin process, as the node runs it: SIGKILL, and the kubelet starts it again.
        execFileSync('pkill', ['-KILL', '-f', '--', `--cache-dir=${stack.realNode!.modelCacheDir}`]);
        counted.throttle = 0;
        operator = startOperator();
        await ready('big');
        const sent = counted.bytes - before;
        console.log(
          `256 MiB over a SIGKILLed plugin and operator: the store sent ${sent} bytes (${(sent / big.length).toFixed(3)}x)`,
        );
        expect(sent / big.length).toBeLessThanOrEqual(1.1);
        expect(pluginLog()).toContain('fetched and verified');
        // The kill was real: the kubelet started the plugin's container again.
        const restarts = modelCachePods(stack, 'jsonpath={.items[*].status.containerStatuses[*].restartCount}');
        expect(Number(restarts.trim().split(' ')[0])).toBeGreaterThanOrEqual(1);
        // The restarted plugin kept the running model's mount: it still reads its model.
        const [steadyPod] = k.list<PodView>('pods', ns, 'app.kubernetes.io/instance=steady');
        const listed = kubectlRun(stack, ['exec', '-n', ns, steadyPod!.metadata.name, '--', 'ls', '/mnt/models']);
        expect(listed.trim()).toBe('digits.joblib');
        expect(await predict('steady')).toMatchObject({ outputs: [{ data: [0, 1] }] });
        await remove('big', 'steady');
      } finally {
        counted.throttle = 0;
      }
    }, 480_000);

    it('retries a store that answers 503 for a while (ModelFetchRetrying), Ready once it recovers', async () => {
      const { uri, sha256 } = await putObject(store, 'busy/v1/digits.joblib', paddedModel(1));
      counted.failPath = '/busy/';
      counted.failNext = 3;
      k.apply(stored('busy', uri, { sha256 }));
      // The store's 503 in the status (a retried mount may first say something else that passes).
      const retrying = await eventually(
        "busy: ModelFetchRetrying with the store's 503",
        () => {
          const r = phaseAndReady('busy');
          return r.reason === 'ModelFetchRetrying' && /busy\/v1\/digits.joblib: 503 SlowDown/.test(r.message)
            ? r
            : undefined;
        },
        60_000,
      );
      expect(retrying.phase).not.toBe('Failed');
      expect(conditionOf(k.get('machinemodel', ns, 'busy'), 'Stalled')?.status).not.toBe('True');
      await ready('busy');
      await remove('busy');
    }, 360_000);

    it("keeps the store's keys out of every workflow history, Event and log line", () => {
      const { accessKeyId, secretAccessKey } = readCredentials(store);
      const temporal = stack.binaries.temporal;
      const env = { ...process.env, TEMPORAL_ADDRESS: stack.temporalAddress };
      const ids = JSON.parse(
        execFileSync(temporal, ['workflow', 'list', '--query', `TaskQueue = "${taskQueue}"`, '--output', 'json'], {
          env,
          encoding: 'utf8',
        }),
      ) as { execution: { workflowId: string; runId: string } }[];
      expect(ids.length).toBeGreaterThan(0);
      for (const { execution } of ids) {
        const history = execFileSync(
          temporal,
          ['workflow', 'show', '--workflow-id', execution.workflowId, '--run-id', execution.runId, '--output', 'json'],
          { env, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 },
        );
        expect(history).not.toContain(secretAccessKey);
        expect(history).not.toContain(accessKeyId);
      }
      const events = kubectlRun(stack, ['get', 'events', '-A', '-o', 'json']);
      expect(events).not.toContain(secretAccessKey);
      expect(events).not.toContain('not-a-secret');
      const operatorLog = readFileSync(operator.logFile, 'utf8');
      expect(operatorLog).not.toContain(secretAccessKey);
      expect(operatorLog).not.toContain('not-a-secret');
      const plugin = pluginLog();
      expect(plugin).toContain('published');
      expect(plugin).not.toContain(secretAccessKey);
      expect(plugin).not.toContain(accessKeyId);
      expect(plugin).not.toContain('not-a-secret');
    });
  },
);
