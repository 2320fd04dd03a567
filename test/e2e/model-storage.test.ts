// Models whose weights are in object storage (issue 40), on the real node, from the stack's real S3
// store (SeaweedFS): the fetch-model init container fetches the artifact into the node's cache, the
// reference server loads it and answers through the gateway; a second replica and a rollback find
// it there and fetch nothing; a store that refuses is ModelUnavailable within a minute of the apply;
// a flipped byte is never served; and the store's keys appear in no history, Event or log line.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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
import { kubectlRun, startStackObjectStore } from '../../tools/local-stack/stack.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { CountingProxy } from '../support/counting-proxy.js';
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
let ns: string;

const mmctl = mmctlFor(stack, taskQueue);

const stored = (name: string, storageUri: string, extra: object = {}) =>
  machineModel(ns, name, {
    image: modelServerImage.ref,
    modelPath: undefined,
    storageUri,
    storageSecret: 'store',
    resources: { cpu: '250m', memory: '256Mi' },
    replicas: 1,
    ...extra,
  });

const phaseAndReady = (name: string) => phaseAndReadyOf(k.get('machinemodel', ns, name));

interface PodView {
  metadata: { name: string; creationTimestamp: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
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
      MMO_NAMESPACES: ns,
      MMO_TASK_QUEUE: taskQueue,
      ...caddy.operatorEnv,
      MMO_CADDY_UPSTREAM: 'cluster-ip',
      // The node's cache inside the stack's folder, not the machine's /var/lib.
      MMO_MODEL_CACHE_DIR: cacheDir(),
    },
    'model-storage',
  );
}

const cacheDir = () => path.join(stack.stateDir, 'model-cache');

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

/** Every fetch-model log read in this file, for the check that no key is in any. */
const fetchLogs: string[] = [];

/** A Pod's fetch-model log ('' while the container never ran, as without its Secret). */
function fetchLog(pod: string): string {
  try {
    const log = kubectlRun(stack, ['logs', '-n', ns, pod, '-c', 'fetch-model']);
    fetchLogs.push(log);
    return log;
  } catch {
    return '';
  }
}

/** What the fetch-model container of each live Pod of the model said last: its final JSON line. */
function fetchResults(name: string): { pod: string; fetched?: number; msg?: string }[] {
  const pods = k.list<PodView>('pods', ns, `app.kubernetes.io/instance=${name}`);
  return pods
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => {
      const log = fetchLog(p.metadata.name);
      const last = log
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { fetched?: number; msg?: string })
        .at(-1);
      return { pod: p.metadata.name, ...last };
    });
}

async function predict(name: string): Promise<unknown> {
  const url = k.get('machinemodel', ns, name)?.status?.gatewayURL as string;
  const res = await request(
    'POST',
    `${url}/v2/models/${name}/infer`,
    digitsRequest([sampleDigits.zero, sampleDigits.one]),
  );
  return res.status === 200 ? JSON.parse(res.body) : undefined;
}

describe.skipIf(!stack.realNode)(
  `models from object storage on the real node (${stack.simulatedOnly ?? realNodeName})`,
  () => {
    beforeAll(async () => {
      store = await startStackObjectStore(stack);
      installCrds(stack);
      caddy = await CaddyProcess.create(stack);
      ns = k.createRealNodeNamespace('storage');
      k.apply(storeSecret(store, ns, 'store'));
      operator = startOperatorProcess(
        stack,
        {
          MMO_NAMESPACES: ns,
          MMO_TASK_QUEUE: taskQueue,
          ...caddy.operatorEnv,
          MMO_CADDY_UPSTREAM: 'cluster-ip',
          // The node's cache inside the stack's folder, not the machine's /var/lib.
          MMO_MODEL_CACHE_DIR: path.join(stack.stateDir, 'model-cache'),
        },
        'model-storage',
      );
    }, 900_000);

    afterAll(async () => {
      await operator?.stop();
      await caddy?.stop();
      if (ns) kubectlRun(stack, ['delete', 'namespace', ns, '--wait=false']);
    });

    it('serves a model from s3:// through the gateway; a second replica on the node fetches 0 bytes', async () => {
      const sample = store.sampleModel!;
      const applied = Date.now();
      k.apply(stored('digits', sample.uri, { sha256: sample.sha256 }));
      await eventually(
        'Ready from the store',
        () => (phaseAndReady('digits').phase === 'Ready' ? true : undefined),
        180_000,
      );
      console.log(`apply to Ready, cold (the node fetches ${sample.size} bytes): ${Date.now() - applied} ms`);
      expect(fetchResults('digits')).toEqual([
        expect.objectContaining({ msg: 'fetched and verified', fetched: sample.size }),
      ]);
      const answer = await eventually('a prediction through the gateway', () => predict('digits'), 60_000);
      expect(answer).toMatchObject({ model_name: 'digits', outputs: [{ name: 'label', data: [0, 1] }] });

      kubectlRun(stack, ['patch', 'machinemodel', '-n', ns, 'digits', '--type=merge', '-p', '{"spec":{"replicas":2}}']);
      await eventually(
        'two replicas ready',
        () => (k.get('machinemodel', ns, 'digits')?.status?.ready === '2/2' ? true : undefined),
        120_000,
      );
      const results = fetchResults('digits');
      expect(results).toHaveLength(2);
      expect(results.map((r) => r.fetched).sort()).toEqual([0, sample.size]);
      const pods = k.list<PodView>('pods', ns, 'app.kubernetes.io/instance=digits');
      expect(new Set(pods.map((p) => p.spec.nodeName))).toEqual(new Set([realNodeName]));
    }, 360_000);

    it('rolls forward to a new artifact and back to the cached one, which fetches 0 bytes', async () => {
      const sample = store.sampleModel!;
      // Bytes of their own, so the node must fetch v2; v1's stay in its cache.
      const bytes = paddedModel(1);
      const v2 = await putObject(store, 'digits/v2/digits.joblib', bytes);
      k.apply(stored('digits', v2.uri, { sha256: v2.sha256, replicas: 1 }));
      await eventually(
        'v2 rolled out',
        () =>
          phaseAndReady('digits').phase === 'Ready' &&
          fetchResults('digits').every(
            (r) => r.msg === 'fetched and verified' || r.msg === 'the artifact is in the node cache',
          ) &&
          k
            .list<{ spec: { containers: { env: { name: string; value: string }[] }[] } }>(
              'pods',
              ns,
              'app.kubernetes.io/instance=digits',
            )
            .every((p) => p.spec.containers[0]!.env.some((e) => e.value.includes('digits/v2/')))
            ? true
            : undefined,
        180_000,
      );
      expect(fetchResults('digits').map((r) => r.fetched)).toEqual([bytes.length]);

      k.apply(stored('digits', sample.uri, { sha256: sample.sha256, replicas: 1 }));
      await eventually(
        'back on v1',
        () =>
          phaseAndReady('digits').phase === 'Ready' &&
          k
            .list<{ spec: { containers: { env: { name: string; value: string }[] }[] } }>(
              'pods',
              ns,
              'app.kubernetes.io/instance=digits',
            )
            .every((p) => p.spec.containers[0]!.env.some((e) => e.value.includes(sampleModelKey)))
            ? true
            : undefined,
        180_000,
      );
      // The rollback: v1's artifact is in the node's cache, so nothing is fetched.
      expect(fetchResults('digits').map((r) => r.fetched)).toEqual([0]);
      expect(await predict('digits')).toMatchObject({ outputs: [{ data: [0, 1] }] });
      await remove('digits');
    }, 540_000);

    it('reports a missing object and a forbidden one as ModelUnavailable within 60 s of the apply', async () => {
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
          /secret "absent" not found/,
        ],
      ] as const) {
        const applied = Date.now();
        k.apply(spec);
        const s = await eventually(
          `${name}: ModelUnavailable`,
          () => {
            const r = phaseAndReady(name);
            return r.phase === 'Failed' && r.reason === 'ModelUnavailable' ? r : undefined;
          },
          60_000,
        );
        console.log(`${name}: ModelUnavailable ${Date.now() - applied} ms after the apply: ${s.message}`);
        expect(s.message).toMatch(words);
        expect(conditionOf(k.get('machinemodel', ns, name), 'Stalled')).toMatchObject({
          status: 'True',
          reason: 'ModelUnavailable',
        });
        fetchResults(name);
      }
      // Fixed by itself once the object is there: the kubelet's next try fetches it.
      await putObject(
        store,
        'digits/none/digits.joblib',
        readFileSync(path.join(stack.stateDir, 'object-store', 'digits.joblib')),
      );
      await eventually(
        'missing: Ready once the object is there',
        () => (phaseAndReady('missing').phase === 'Ready' ? true : undefined),
        360_000,
      );
      await remove('missing', 'forbidden', 'no-secret');
    }, 720_000);

    it('never serves an artifact with one byte flipped: never Ready, both sums in the message', async () => {
      // Bytes of their own: the node's cache keeps artifacts by their sum, and would serve the sum's bytes.
      const bytes = paddedModel(1);
      const { uri, sha256 } = await putObject(store, 'digits/flipped/digits.joblib', bytes);
      bytes[100]! ^= 0x01;
      const flipped = await putObject(store, 'digits/flipped/digits.joblib', bytes);
      k.apply(stored('flipped', uri, { sha256 }));
      const s = await eventually(
        'flipped: ModelUnavailable',
        () => {
          const r = phaseAndReady('flipped');
          return r.reason === 'ModelUnavailable' ? r : undefined;
        },
        60_000,
      );
      expect(s.phase).toBe('Failed');
      expect(s.message).toContain(sha256);
      expect(s.message).toContain(flipped.sha256);
      expect(k.get('machinemodel', ns, 'flipped')?.status?.ready ?? '0/1').toBe('0/1');
      await remove('flipped');
    }, 180_000);

    it('resumes a 256 MiB fetch whose Pod was killed halfway, with the operator killed too: at most 1.15x fetched', async () => {
      const big = paddedModel(256);
      const { uri, sha256 } = await putObject(store, 'big/v1/digits.joblib', big);
      // The store through a proxy on the node's IP, slowed to 16 MiB/s so that the kill lands halfway.
      const proxy = await CountingProxy.start(store.endpoint, stack.realNode!.nodeIp);
      proxy.throttle = 16 * 2 ** 20;
      try {
        k.apply(storeSecret({ ...store, podEndpoint: proxy.endpoint }, ns, 'slow-store'));
        k.apply(stored('big', uri, { sha256, storageSecret: 'slow-store' }));
        const part = path.join(cacheDir(), ns, `sha256-${sha256}`, '.fetch', 'digits.joblib.part');
        await eventually(
          'a quarter of the artifact fetched',
          () => (existsSync(part) && statSync(part).size >= big.length / 4 ? true : undefined),
          120_000,
        );
        // What the fetcher says of its progress, in the model's status, at a round a person asks for.
        mmctl('resync', `${ns}/big`, '--wait');
        const fetching = phaseAndReady('big');
        expect(fetching).toMatchObject({ phase: 'Deploying', reason: 'ModelFetching' });
        expect(fetching.message).toMatch(
          /fetching the model into the node's cache \(1 pod\): [\d.]+ MiB of 256\.0 MiB, [\d.]+ MiB\/s/,
        );
        await eventually(
          'half the artifact fetched',
          () => (existsSync(part) && statSync(part).size >= big.length / 2 ? true : undefined),
          120_000,
        );
        const [pod] = k.list<PodView>('pods', ns, 'app.kubernetes.io/instance=big');
        await operator.kill();
        kubectlRun(stack, ['delete', 'pod', '-n', ns, pod!.metadata.name, '--grace-period=0', '--force']);
        const left = statSync(part).size;
        operator = startOperator();
        await eventually(
          'big Ready after the resumed fetch',
          () => (phaseAndReady('big').phase === 'Ready' ? true : undefined),
          240_000,
        );
        const [result] = fetchResults('big');
        expect(result).toMatchObject({ msg: 'fetched and verified' });
        const resumed = (result as { resumed?: number }).resumed ?? 0;
        expect(resumed).toBeGreaterThanOrEqual(left);
        console.log(
          `256 MiB over a killed Pod and operator: the store sent ${proxy.bytes} bytes (${(proxy.bytes / big.length).toFixed(3)}x), ` +
            `${left} left in the part at the kill, ${resumed} resumed from`,
        );
        expect(proxy.bytes / big.length).toBeLessThanOrEqual(1.15);
        await remove('big');
      } finally {
        await proxy.stop();
      }
    }, 480_000);

    it('retries a store that answers 503 for a while (ModelFetchRetrying, with the attempt), Ready once it recovers', async () => {
      const { uri, sha256 } = await putObject(store, 'busy/v1/digits.joblib', paddedModel(1));
      const proxy = await CountingProxy.start(store.endpoint, stack.realNode!.nodeIp);
      proxy.failNext = 2;
      try {
        k.apply(storeSecret({ ...store, podEndpoint: proxy.endpoint }, ns, 'busy-store'));
        k.apply(stored('busy', uri, { sha256, storageSecret: 'busy-store' }));
        const retrying = await eventually(
          'busy: ModelFetchRetrying',
          () => {
            const r = phaseAndReady('busy');
            return r.reason === 'ModelFetchRetrying' ? r : undefined;
          },
          60_000,
        );
        expect(retrying.phase).not.toBe('Failed');
        expect(retrying.message).toMatch(
          /retrying \(attempt \d+, 1 pod\): s3:\/\/models\/busy\/v1\/digits.joblib: 503 SlowDown/,
        );
        expect(conditionOf(k.get('machinemodel', ns, 'busy'), 'Stalled')?.status).not.toBe('True');
        await eventually(
          'busy Ready once the store answers',
          () => (phaseAndReady('busy').phase === 'Ready' ? true : undefined),
          240_000,
        );
        expect(proxy.requests).toBeGreaterThanOrEqual(3);
        await remove('busy');
      } finally {
        await proxy.stop();
      }
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
      const events = kubectlRun(stack, ['get', 'events', '-n', ns, '-o', 'json']);
      expect(events).not.toContain(secretAccessKey);
      expect(events).not.toContain('not-a-secret');
      const operatorLog = readFileSync(operator.logFile, 'utf8');
      expect(operatorLog).not.toContain(secretAccessKey);
      expect(operatorLog).not.toContain('not-a-secret');
      expect(fetchLogs.length).toBeGreaterThan(5);
      for (const log of fetchLogs) {
        expect(log).not.toContain(secretAccessKey);
        expect(log).not.toContain('not-a-secret');
      }
    });
  },
);
