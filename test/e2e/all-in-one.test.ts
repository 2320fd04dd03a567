// The all-in-one install for real, as kubebuilder projects test theirs with kind: `kubectl apply -k`
// through an overlay that points at the images built here (as an air-gapped user would), on the
// local stack's real node. The Temporal server, the search-attribute Job, both operator replicas and
// the Caddy gateway run as containers; the seed example answers through the gateway;
// `kubectl delete -k` removes it all.
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { request } from '../../activities/gateway/http.js';
import {
  caddyImage,
  misbehavingModelImage,
  nameAndTag,
  operatorImage,
  temporalImage,
} from '../../tools/images/catalog.js';
import { realNodeName, realNodeNamespaceAnnotations } from '../../tools/local-stack/real-node.js';
import { digitsRequest, sampleDigits } from '../../tools/local-stack/sample-digits.js';
import { modelCachePatches } from '../../tools/local-stack/model-cache.js';
import { kubectlRun } from '../../tools/local-stack/stack.js';
import { kubectlFor } from '../support/cluster.js';
import { eventually } from '../support/eventually.js';
import { machineModel, seedExample } from '../support/models.js';
import { installCrds } from '../support/operator-process.js';

const stack = inject('stack');
const k = kubectlFor(stack);
const repo = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const overlay = path.join(stack.stateDir, `all-in-one-${randomUUID().slice(0, 8)}`);
let ns: string;
const kubectl = (...args: string[]) => kubectlRun(stack, args);

const requestCpu = (kind: string, name: string) => ({
  target: { kind, name },
  patch: YAML.stringify([
    { op: 'replace', path: '/spec/template/spec/containers/0/resources/requests/cpu', value: '50m' },
  ]),
});

/** The user's overlay: local image names, the real node for the install's namespaces, one namespace to watch. */
function writeOverlay(): void {
  mkdirSync(overlay, { recursive: true });
  const image = (from: string, to: string) => {
    const [newName, newTag] = nameAndTag(to);
    return { name: nameAndTag(from)[0], newName, newTag };
  };
  const annotate = (name: string) => ({
    target: { kind: 'Namespace', name },
    patch: YAML.stringify([{ op: 'add', path: '/metadata/annotations', value: realNodeNamespaceAnnotations }]),
  });
  writeFileSync(
    path.join(overlay, 'kustomization.yaml'),
    YAML.stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [path.relative(overlay, repo('deploy/installs/all-in-one'))],
      images: [
        image(operatorImage.aliases![0]!, operatorImage.ref),
        image('temporalio/temporal:1.9.1', temporalImage.ref),
        image('caddy:2.11.7', caddyImage.ref),
      ],
      patches: [
        // The model cache's plugin on this stack's node: its kubelet folder, a 1 GiB cap.
        ...modelCachePatches(stack).patches,
        annotate('machinemodel-system'),
        annotate('temporal'),
        annotate('machinemodel-gateway'),
        // The real node has this machine's 2 CPUs: the install's requests (sized for a real cluster)
        // and the seed example's 2 x 500m would leave no room for a rolling update.
        requestCpu('Deployment', 'machinemodel-operator'),
        requestCpu('Deployment', 'temporal'),
        {
          target: { kind: 'Deployment', name: 'machinemodel-operator' },
          patch: YAML.stringify([
            {
              op: 'add',
              path: '/spec/template/spec/containers/0/env/-',
              value: { name: 'MMO_NAMESPACES', value: ns },
            },
          ]),
        },
      ],
    }),
  );
}

/** The stack has no storage provisioner: a volume on the node's disk for the Temporal server's claim. */
const volume = `temporal-volume-${randomUUID().slice(0, 8)}`;
function temporalVolume(): void {
  const dir = path.join(stack.stateDir, volume);
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o777);
  k.apply({
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: path.basename(dir) },
    spec: {
      capacity: { storage: '2Gi' },
      accessModes: ['ReadWriteOnce'],
      persistentVolumeReclaimPolicy: 'Delete',
      hostPath: { path: dir, type: 'Directory' },
      claimRef: { namespace: 'temporal', name: 'temporal-data' },
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'In', values: [realNodeName] }] },
          ],
        },
      },
    },
  });
}

const pods = (namespace: string, selector?: string) =>
  k.list<{
    metadata: { name: string };
    spec: {
      nodeName?: string;
      securityContext?: { runAsUser?: number; runAsNonRoot?: boolean };
      containers: any[];
    };
    status: { phase: string; containerStatuses?: { ready: boolean }[] };
  }>('pods', namespace, selector);
const operatorPods = () => pods('machinemodel-system', 'app.kubernetes.io/name=machinemodel-operator');
const allReady = (list: ReturnType<typeof pods>, n: number) =>
  list.length === n && list.every((p) => p.status.containerStatuses?.every((c) => c.ready)) ? list : undefined;

describe.skipIf(!stack.realNode)(
  `the all-in-one install on the real node (${stack.simulatedOnly ?? realNodeName})`,
  () => {
    beforeAll(() => {
      installCrds(stack);
      ns = k.createRealNodeNamespace('served');
      writeOverlay();
      temporalVolume();
      kubectl('apply', '--server-side', '-k', overlay);
    });

    afterAll(() => {
      kubectl('delete', 'namespace', ns, '--ignore-not-found', '--wait=false');
      kubectl('delete', '-k', overlay, '--ignore-not-found', '--wait=false');
      kubectl('delete', 'persistentvolume', volume, '--ignore-not-found', '--wait=false');
    });

    it('runs Temporal, registers the search attributes, and both operator replicas become ready as the non-root user on a read-only root', async () => {
      await eventually(
        'Temporal Ready',
        () => allReady(pods('temporal', 'app.kubernetes.io/name=temporal'), 1),
        180_000,
      );
      await eventually(
        'the search-attribute Job complete',
        () => {
          const jobs = k.list<{ status: { succeeded?: number } }>('jobs', 'temporal');
          return jobs.length > 0 && jobs.every((j) => j.status.succeeded === 1) ? true : undefined;
        },
        120_000,
      );
      const operators = await eventually(
        'both operator replicas Ready on /readyz',
        () => allReady(operatorPods(), 2),
        180_000,
      );
      // Both replicas Ready once each serves the models' listener, which the operator gives it.
      await eventually('both gateway replicas Ready', () => allReady(pods('machinemodel-gateway'), 2), 120_000);
      for (const p of operators) {
        expect(p.spec.nodeName).toBe(realNodeName);
        expect(p.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532 });
        expect(p.spec.containers[0].securityContext).toMatchObject({ readOnlyRootFilesystem: true });
        expect(p.spec.containers[0].image).toBe(operatorImage.ref);
      }
      // The two replicas split the install's 4 shards of the mixed hash through Leases, two each.
      const holders = await eventually(
        'every shard held, two by each replica',
        () => {
          const leases = k.list<{ metadata: { name: string }; spec: { holderIdentity?: string } }>(
            'leases',
            'machinemodel-system',
            'app.kubernetes.io/part-of=machinemodel-operator',
          );
          const shardHolders = leases
            .filter((l) => /-shard-\d+-of-4m$/.test(l.metadata.name))
            .map((l) => l.spec.holderIdentity);
          const counts = [...new Set(shardHolders)].map((h) => shardHolders.filter((x) => x === h).length);
          return shardHolders.length === 4 && shardHolders.every(Boolean) && counts.join() === '2,2'
            ? shardHolders
            : undefined;
        },
        60_000,
      );
      for (const holder of new Set(holders))
        expect(operators.some((p) => holder!.startsWith(p.metadata.name))).toBe(true);
      // The model cache's plugin on the node: registered with the kubelet, the install's one privileged Pod.
      const plugin = await eventually(
        'the model cache plugin Ready',
        () => allReady(pods('machinemodel-system', 'app.kubernetes.io/name=model-cache'), 1),
        120_000,
      );
      expect(plugin[0]!.spec.containers[0].image).toBe(operatorImage.ref);
      const privileged = ['machinemodel-system', 'temporal', 'machinemodel-gateway']
        .flatMap((n) => pods(n))
        .filter((p) => p.spec.containers.some((c) => c.securityContext?.privileged));
      expect(privileged.map((p) => p.metadata.name)).toEqual([plugin[0]!.metadata.name]);
      await eventually(
        'the kubelet registered the model cache',
        () =>
          kubectl('get', 'csinode', realNodeName, '-o', 'jsonpath={.spec.drivers[*].name}').includes(
            'model-cache.stable.example.com',
          )
            ? true
            : undefined,
        60_000,
      );
    }, 420_000);

    it('serves the seed example: Ready, published on the gateway, and a prediction through it', async () => {
      k.apply({ ...seedExample, metadata: { ...seedExample.metadata, namespace: ns } });
      const name = seedExample.metadata.name;
      const url = await eventually(
        'Ready and published',
        () => {
          const mm = k.get('machinemodel', ns, name);
          return mm?.status?.phase === 'Ready' ? (mm.status.gatewayURL as string | undefined) : undefined;
        },
        180_000,
      );
      expect(url).toBe(`http://caddy.machinemodel-gateway.svc/models/${ns}/${name}`);
      // This machine is not in the cluster's DNS: the gateway Service's cluster IP stands in for its name.
      const ip = kubectl('get', 'service', 'caddy', '-n', 'machinemodel-gateway', '-o', 'jsonpath={.spec.clusterIP}');
      const res = await request(
        'POST',
        `${url.replace('caddy.machinemodel-gateway.svc', ip.trim())}/v2/models/${name}/infer`,
        digitsRequest([sampleDigits.zero]),
      );
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toMatchObject({ outputs: [{ name: 'label', data: [0] }] });
    }, 240_000);

    it('loses nothing when an operator Pod is deleted in the middle of a rollout', async () => {
      k.apply(machineModel(ns, 'rolled', { image: misbehavingModelImage.ref, modelPath: '/slow-15', replicas: 1 }));
      await eventually('v1 Ready', () => (k.phaseOf(ns, 'rolled') === 'Ready' ? true : undefined), 120_000);
      k.apply(machineModel(ns, 'rolled', { image: misbehavingModelImage.ref, modelPath: '/slow-20', replicas: 1 }));
      await eventually('the rollout under way', () => (k.phaseOf(ns, 'rolled') === 'Deploying' ? true : undefined));
      kubectl('delete', 'pod', '-n', 'machinemodel-system', operatorPods()[0]!.metadata.name, '--wait=false');
      await eventually(
        'v2 Ready',
        () => {
          const mm = k.get('machinemodel', ns, 'rolled');
          return mm?.status?.observedGeneration === 2 && mm.status.phase === 'Ready' ? true : undefined;
        },
        180_000,
      );
      await eventually('two replicas again', () => allReady(operatorPods(), 2), 180_000);
    }, 420_000);

    it('leaves nothing behind after kubectl delete -k', async () => {
      // Models first, while the operator runs their finalizers.
      kubectl('delete', 'machinemodels', '--all', '-n', ns, '--wait=true', '--timeout=120s');
      kubectl('delete', '-k', overlay, '--wait=true', '--timeout=180s');
      const left = kubectl('get', '-k', overlay, '--ignore-not-found', '-o', 'name').trim();
      expect(left).toBe('');
      for (const namespace of ['machinemodel-system', 'temporal', 'machinemodel-gateway']) {
        expect(kubectl('get', 'namespace', namespace, '--ignore-not-found', '-o', 'name').trim()).toBe('');
      }
    }, 300_000);
  },
);
