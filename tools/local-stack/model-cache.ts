// The model cache's node plugin on the stack's real node, installed from deploy/model-cache as a
// user installs it (kubectl apply -k), through an overlay that does what a node of this stack needs:
// the operator image built here, the kubelet's and the cache's folders under the stack's, and the
// real node for the operator's namespace. Idempotent: `npm start`, the tests and the benchmark call it.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { nameAndTag, operatorImage } from '../images/catalog.js';
import { realNodeLabel, realNodeName, realNodeNamespaceAnnotations } from './real-node.js';
import { kubectlRun, type StackInfo } from './stack.js';

const repo = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
export const modelCacheDriver = 'model-cache.stable.example.com';
export const modelCacheNamespace = 'machinemodel-system';
export const localCacheSize = '1Gi';

/**
 * Patches that put deploy/model-cache's DaemonSet on this stack's node: its folders and image.
 * Shared with the all-in-one test's overlay, which installs the same DaemonSet with the operator.
 */
export function modelCachePatches(stack: StackInfo) {
  const node = stack.realNode;
  if (!node) throw new Error('the model cache needs the real node');
  const [newName, newTag] = nameAndTag(operatorImage.ref);
  const [name] = nameAndTag(operatorImage.aliases![0]!);
  const container = '/spec/template/spec/containers/0';
  return {
    images: [{ name, newName, newTag }],
    patches: [
      {
        target: { kind: 'DaemonSet', name: 'model-cache' },
        patch: YAML.stringify([
          { op: 'replace', path: `${container}/args/1`, value: `--kubelet-dir=${node.kubeletDir}` },
          { op: 'replace', path: `${container}/args/2`, value: `--cache-dir=${node.modelCacheDir}` },
          { op: 'replace', path: `${container}/volumeMounts/0/mountPath`, value: node.kubeletDir },
          { op: 'replace', path: `${container}/volumeMounts/1/mountPath`, value: node.modelCacheDir },
          { op: 'replace', path: '/spec/template/spec/volumes/0/hostPath/path', value: node.kubeletDir },
          { op: 'replace', path: '/spec/template/spec/volumes/1/hostPath/path', value: node.modelCacheDir },
          // The stack's disk is the machine's: a cap of 1 GiB, which the tests fill on purpose.
          { op: 'add', path: `${container}/args/-`, value: `--cache-size=${localCacheSize}` },
          // Progress in the model's status every 10 s of a fetch (the default is 30).
          { op: 'add', path: `${container}/args/-`, value: '--publish-wait=10' },
          // The real node only: the KWOK node runs no kubelet to register with.
          { op: 'add', path: '/spec/template/spec/nodeSelector', value: { [realNodeLabel.key]: realNodeLabel.value } },
          // This machine's 2 CPUs are shared with the models and the tests.
          { op: 'replace', path: `${container}/resources/requests/cpu`, value: '10m' },
        ]),
      },
    ],
  };
}

/** Installs the plugin and waits until the kubelet has registered it (its CSINode lists the driver). */
export async function ensureModelCache(stack: StackInfo, log: (line: string) => void = () => undefined): Promise<void> {
  const overlay = path.join(stack.stateDir, 'model-cache-install');
  mkdirSync(overlay, { recursive: true });
  const { images, patches } = modelCachePatches(stack);
  writeFileSync(
    path.join(overlay, 'namespace.yaml'),
    YAML.stringify({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: modelCacheNamespace,
        labels: { 'pod-security.kubernetes.io/enforce': 'privileged' },
        annotations: realNodeNamespaceAnnotations,
      },
    }),
  );
  writeFileSync(
    path.join(overlay, 'kustomization.yaml'),
    YAML.stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: ['namespace.yaml', path.relative(overlay, repo('deploy/model-cache'))],
      images,
      patches,
    }),
  );
  kubectlRun(stack, ['apply', '--server-side', '--force-conflicts', '-k', overlay]);
  log(`installed the model cache's plugin (DaemonSet ${modelCacheNamespace}/model-cache)`);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const drivers = kubectlRun(stack, [
      'get',
      'csinode',
      realNodeName,
      '--ignore-not-found',
      '-o',
      'jsonpath={.spec.drivers[*].name}',
    ]);
    if (drivers.split(' ').includes(modelCacheDriver)) return;
    if (Date.now() > deadline) {
      const pods = modelCachePods(stack, 'wide');
      const log = kubectlRun(stack, ['logs', '-n', modelCacheNamespace, 'daemonset/model-cache', '--tail=5']).trim();
      throw new Error(`the kubelet did not register ${modelCacheDriver} within 120 s:\n${pods}\n${log}`);
    }
    await sleep(1_000);
  }
}

/** The plugin's Pods, as `kubectl get -o <output>` shows them. */
export function modelCachePods(stack: StackInfo, output: string): string {
  const selector = 'app.kubernetes.io/name=model-cache';
  return kubectlRun(stack, ['get', 'pods', '-n', modelCacheNamespace, '-l', selector, '-o', output]);
}
