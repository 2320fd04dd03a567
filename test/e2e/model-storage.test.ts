// Models whose weights are in object storage (issue 40), on the real node, from the stack's real S3
// store (SeaweedFS): the fetch-model init container fetches the artifact into the node's cache, the
// reference server loads it and answers through the gateway; a second replica and a rollback find
// it there and fetch nothing; a store that refuses is ModelUnavailable within a minute of the apply;
// a flipped byte is never served; and the store's keys appear in no history, Event or log line.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
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
import { kubectlRun, startStackObjectStore } from '../../tools/local-stack/stack.js';
import { CaddyProcess } from '../support/caddy-under-test.js';
import { conditionOf, kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel } from '../support/models.js';
import { installCrds, startOperatorProcess, type OperatorProcess } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const taskQueue = `mmo-${randomUUID()}`;
let operator: OperatorProcess;
let caddy: CaddyProcess;
let store: ObjectStoreInfo;
let ns: string;

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

const phaseAndReady = (name: string) => {
  const mm = k.get('machinemodel', ns, name);
  const ready = conditionOf(mm, 'Ready');
  return { phase: mm?.status?.phase as string | undefined, reason: ready?.reason, message: ready?.message ?? '' };
};

interface PodView {
  metadata: { name: string; creationTimestamp: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
}

/** What the fetch-model container of each live Pod of the model said last: its final JSON line. */
function fetchResults(name: string): { pod: string; fetched?: number; msg?: string }[] {
  const pods = k.list<PodView>('pods', ns, `app.kubernetes.io/instance=${name}`);
  return pods
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => {
      const log = kubectlRun(stack, ['logs', '-n', ns, p.metadata.name, '-c', 'fetch-model']);
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
      const bytes = readFileSync(path.join(stack.stateDir, 'object-store', 'digits.joblib'));
      const v2 = await putObject(store, 'digits/v2/digits.joblib', bytes);
      k.apply(stored('digits', v2.uri, { sha256: v2.sha256, replicas: 2 }));
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
      // The same bytes under the same sum: the node's cache has them already, so v2 fetches nothing either.
      expect(fetchResults('digits').map((r) => r.fetched)).toEqual([0, 0]);

      k.apply(stored('digits', sample.uri, { sha256: sample.sha256, replicas: 2 }));
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
      expect(fetchResults('digits').map((r) => r.fetched)).toEqual([0, 0]);
      expect(await predict('digits')).toMatchObject({ outputs: [{ data: [0, 1] }] });
    }, 420_000);

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
    }, 600_000);

    it('never serves an artifact with one byte flipped: never Ready, both sums in the message', async () => {
      const bytes = Buffer.from(readFileSync(path.join(stack.stateDir, 'object-store', 'digits.joblib')));
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
    }, 120_000);

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
      for (const name of ['digits', 'missing', 'forbidden', 'flipped']) {
        const pods = k.list<PodView>('pods', ns, `app.kubernetes.io/instance=${name}`);
        for (const p of pods) {
          const log = kubectlRun(stack, ['logs', '-n', ns, p.metadata.name, '-c', 'fetch-model']);
          expect(log).not.toContain(secretAccessKey);
          expect(log).not.toContain('not-a-secret');
        }
      }
    });
  },
);
