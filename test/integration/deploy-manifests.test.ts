// The in-cluster install (kubectl apply -k deploy/operator) as the real apiserver judges it. No image is
// built here (no container engine), so the Deployment is checked by server-side dry run, not run.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { describe, expect, inject, it } from 'vitest';
import { kubectlRun } from '../../deploy/local/stack.js';
import { operatorEnvironment, parseOperatorConfig } from '../../src/plumbing/config.js';

const stack = inject('stack');
const dir = fileURLToPath(new URL('../../deploy/operator', import.meta.url));

interface Rendered {
  kind: string;
  metadata: { name: string; namespace?: string };
  [key: string]: any;
}

const render = () => YAML.parseAllDocuments(kubectlRun(stack, ['kustomize', dir])).map((d) => d.toJS() as Rendered);

describe('deploy/operator (kubectl apply -k)', () => {
  it('renders the CRD, namespace, ServiceAccount, RBAC and Deployment', () => {
    expect(
      render()
        .map((o) => o.kind)
        .sort(),
    ).toEqual([
      'ClusterRole',
      'ClusterRoleBinding',
      'CustomResourceDefinition',
      'Deployment',
      'Namespace',
      'ServiceAccount',
    ]);
  });

  it('is accepted by the apiserver with strict field validation', () => {
    // Namespaced objects need their namespace to exist, even in a dry run.
    kubectlRun(stack, ['apply', '-f', path.join(dir, 'namespace.yaml')]);
    const out = kubectlRun(stack, [
      'apply',
      '-k',
      dir,
      '--server-side',
      '--force-conflicts',
      '--dry-run=server',
      '--validate=strict',
    ]);
    expect(out).toContain('deployment.apps/machinemodel-operator serverside-applied (server dry run)');
  });

  it('runs the operator as its ServiceAccount, with settings the operator reads and a probe on its health port', () => {
    const objects = render();
    const deployment = objects.find((o) => o.kind === 'Deployment')!;
    const binding = objects.find((o) => o.kind === 'ClusterRoleBinding')!;
    const pod = deployment.spec.template.spec;
    expect(binding.subjects).toContainEqual({
      kind: 'ServiceAccount',
      name: pod.serviceAccountName,
      namespace: deployment.metadata.namespace,
    });

    const container = pod.containers[0];
    const env = Object.fromEntries((container.env as { name: string; value: string }[]).map((e) => [e.name, e.value]));
    expect(Object.keys(env).filter((name) => !operatorEnvironment().includes(name))).toEqual([]);

    const saved = { ...process.env };
    try {
      Object.assign(process.env, env);
      const config = parseOperatorConfig([]);
      const probePort = container.ports.find(
        (p: { name: string }) => p.name === container.livenessProbe.httpGet.port,
      ).containerPort;
      expect(config.metrics).toEqual({ port: probePort, host: '0.0.0.0' });
      expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    } finally {
      process.env = saved;
    }
  });
});
