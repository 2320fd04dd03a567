// The in-cluster installs (kubectl apply -k deploy/installs/...) as the real apiserver judges them, the
// operator's settings in each as the operator reads them, what each leaves out (the CRD, shipped apart)
// and who may reach the all-in-one Temporal, and the all-in-one Temporal server's command and
// search-attribute Job run as written with the same Temporal CLI version as their image. No image is
// built or run here (no container engine), so the Deployments are checked by server-side dry run.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { temporalCli } from '../../tools/local-stack/components.js';
import { freePort } from '../../tools/local-stack/processes.js';
import { kubectlRun } from '../../tools/local-stack/stack.js';
import { operatorEnvironment, parseOperatorConfig, type OperatorConfig } from '../../src/process/config.js';
import { operatorSearchAttributes } from '../../workflows/search-attributes.js';
import { eventually } from '../support/eventually.js';

const stack = inject('stack');
const repo = (p: string) => fileURLToPath(new URL(`../../${p}`, import.meta.url));

interface Rendered {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: any;
}

/** existing-temporal with the mTLS component, as a user would combine them (a kustomization of their own). */
function mtlsInstall(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mmo-install-'));
  const rel = (p: string) => path.relative(dir, repo(p));
  writeFileSync(
    path.join(dir, 'kustomization.yaml'),
    YAML.stringify({
      resources: [rel('deploy/installs/existing-temporal')],
      components: [rel('deploy/installs/components/temporal-mtls')],
    }),
  );
  return dir;
}

const installs: Record<string, string> = {
  'all-in-one': repo('deploy/installs/all-in-one'),
  'existing-temporal': repo('deploy/installs/existing-temporal'),
  'existing-temporal with mTLS': mtlsInstall(),
};

const render = (dir: string) =>
  YAML.parseAllDocuments(kubectlRun(stack, ['kustomize', dir])).map((d) => d.toJS() as Rendered);
const find = (objects: Rendered[], kind: string, name: string) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name)!;
/** Namespaced objects need their namespace to exist, even in a dry run. */
const applyNamespaces = (objects: Rendered[]) => {
  for (const ns of objects.filter((o) => o.kind === 'Namespace')) {
    kubectlRun(stack, ['apply', '-f', '-'], JSON.stringify(ns));
  }
};

/** The operator's configuration from its container's environment (Secret values stand in as placeholders). */
function operatorConfigOf(container: any): { config: OperatorConfig; env: Record<string, string> } {
  const env = Object.fromEntries(
    (container.env as { name: string; value?: string; valueFrom?: object }[]).map((e) => [
      e.name,
      e.value ?? `<from ${JSON.stringify(e.valueFrom)}>`,
    ]),
  );
  const saved = { ...process.env };
  try {
    for (const name of operatorEnvironment()) delete process.env[name];
    Object.assign(process.env, env);
    return { config: parseOperatorConfig([]), env };
  } finally {
    process.env = saved;
  }
}

describe.each(Object.entries(installs))('install %s', (name, dir) => {
  const objects = render(dir);
  const deployment = find(objects, 'Deployment', 'machinemodel-operator');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];

  it('is accepted by the apiserver with strict field validation', () => {
    applyNamespaces(objects);
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
    expect(out).toContain('poddisruptionbudget.policy/machinemodel-operator serverside-applied (server dry run)');
  });

  it('brings no CustomResourceDefinition, so deleting it leaves the CRD, every model and its workloads', () => {
    expect(objects.filter((o) => o.kind === 'CustomResourceDefinition').map((o) => o.metadata.name)).toEqual([]);
  });

  it('sets only what the operator reads, probes the port it serves /healthz and /readyz on, names the SDK metrics port', () => {
    const { config, env } = operatorConfigOf(container);
    expect(Object.keys(env).filter((n) => !operatorEnvironment().includes(n))).toEqual([]);
    const probePort = (probe: { httpGet: { port: string } }) =>
      container.ports.find((p: { name: string }) => p.name === probe.httpGet.port).containerPort;
    const portNamed = (name: string) => container.ports.find((p: { name: string }) => p.name === name).containerPort;
    expect(config.metrics).toEqual({
      port: probePort(container.livenessProbe),
      host: '0.0.0.0',
      sdkPort: portNamed('sdk-metrics'),
    });
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(probePort(container.readinessProbe)).toBe(config.metrics.port);
  });

  it('runs the operator as its ServiceAccount, hardened, on two replicas a disruption cannot both take', () => {
    const binding = find(objects, 'ClusterRoleBinding', 'machinemodel-operator');
    expect(binding.subjects).toContainEqual({
      kind: 'ServiceAccount',
      name: pod.serviceAccountName,
      namespace: deployment.metadata.namespace,
    });
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(container.resources.limits.memory).toEqual(expect.any(String));

    expect(deployment.spec.replicas).toBeGreaterThanOrEqual(2);
    const podLabels = deployment.spec.template.metadata.labels;
    const pdb = find(objects, 'PodDisruptionBudget', 'machinemodel-operator');
    expect(pdb.metadata.namespace).toBe(deployment.metadata.namespace);
    expect(podLabels).toMatchObject(pdb.spec.selector.matchLabels);
    expect(pdb.spec.minAvailable).toBe(1);
    expect(pod.topologySpreadConstraints).toContainEqual(
      expect.objectContaining({ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: podLabels } }),
    );
  });
});

describe('the CRD, shipped apart from the installs', () => {
  it('is what `kubectl apply --server-side -k crds` applies, and nothing else', () => {
    expect(render(repo('crds')).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      'CustomResourceDefinition/machinemodels.stable.example.com',
    ]);
  });
});

describe('the connection settings of each install', () => {
  const configOf = (dir: string) => {
    const objects = render(dir);
    const deployment = find(objects, 'Deployment', 'machinemodel-operator');
    return { objects, deployment, ...operatorConfigOf(deployment.spec.template.spec.containers[0]) };
  };

  it('all-in-one: the operator talks to the Temporal Service the install brings, in plain text', () => {
    const { objects, config } = configOf(installs['all-in-one']!);
    const frontend = find(objects, 'Service', 'temporal-frontend');
    const port = frontend.spec.ports.find((p: { name: string }) => p.name === 'grpc').port;
    expect(config.temporal.address).toBe(`${frontend.metadata.name}.${frontend.metadata.namespace}:${port}`);
    expect(config.temporal.tls).toBeUndefined();
  });

  it('all-in-one: the operator publishes models on each replica of the Caddy the install brings, through a headless Service', () => {
    const { objects, config } = configOf(installs['all-in-one']!);
    const admin = find(objects, 'Service', 'caddy-replicas');
    // Headless: the name resolves to every replica's address, and the operator configures each.
    expect(admin.spec.clusterIP).toBe('None');
    const caddy = find(objects, 'Deployment', 'caddy');
    expect(caddy.spec.replicas).toBe(2);
    const budget = find(objects, 'PodDisruptionBudget', 'caddy');
    expect(budget.spec).toEqual({ minAvailable: 1, selector: caddy.spec.selector });
    const traffic = find(objects, 'Service', 'caddy');
    expect(config.gateway).toMatchObject({
      kind: 'caddy',
      adminURL: `http://${admin.metadata.name}.${admin.metadata.namespace}:${admin.spec.ports[0].port}`,
      publicURL: `http://${traffic.metadata.name}.${traffic.metadata.namespace}.svc`,
    });
    const policy = find(objects, 'NetworkPolicy', 'caddy-admin-from-operator');
    expect(policy.spec.ingress).toContainEqual(
      expect.objectContaining({
        ports: [{ port: 'admin' }],
        from: [
          expect.objectContaining({
            podSelector: {
              matchLabels: find(objects, 'Deployment', 'machinemodel-operator').spec.template.metadata.labels,
            },
          }),
        ],
      }),
    );
  });

  it('existing-temporal: the API key comes from a Secret the operator does not start without, and with it TLS', () => {
    const { deployment, config } = configOf(installs['existing-temporal']!);
    const apiKey = deployment.spec.template.spec.containers[0].env.find(
      (e: { name: string }) => e.name === 'TEMPORAL_API_KEY',
    );
    // Not optional: a missing Secret stops the container from starting instead of meaning plain text.
    expect(apiKey.valueFrom).toEqual({ secretKeyRef: { name: 'temporal-api-key', key: 'api-key', optional: false } });
    expect(config.temporal.apiKey).toBeTruthy();
    expect(config.temporal.tls).toBeDefined();
  });

  it('with mTLS: the client certificate and key are files from the mounted Secret, instead of the API key', () => {
    const { deployment, config, env } = configOf(installs['existing-temporal with mTLS']!);
    expect(env.TEMPORAL_API_KEY).toBeUndefined();
    expect(config.temporal.apiKey).toBeUndefined();
    const pod = deployment.spec.template.spec;
    const mount = pod.containers[0].volumeMounts.find((m: { name: string }) => m.name === 'temporal-tls');
    const volume = pod.volumes.find((v: { name: string }) => v.name === 'temporal-tls');
    expect(volume.secret.secretName).toBe('temporal-mtls');
    expect(config.temporal.tls?.certFile).toBe(path.join(mount.mountPath, 'tls.crt'));
    expect(config.temporal.tls?.keyFile).toBe(path.join(mount.mountPath, 'tls.key'));
  });
});

describe('who may reach the all-in-one Temporal (it has no authentication)', () => {
  const objects = render(installs['all-in-one']!);
  const temporal = find(objects, 'Deployment', 'temporal');
  const operator = find(objects, 'Deployment', 'machinemodel-operator');
  const job = find(objects, 'Job', 'temporal-search-attributes');
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy' && o.metadata.namespace === 'temporal');

  it("selects the Temporal Pods and admits to the frontend's port only the operator, the Job and Temporal itself", () => {
    expect(policies).toHaveLength(1);
    const policy = policies[0]!;
    expect(temporal.metadata.namespace).toBe(policy.metadata.namespace);
    expect(policy.spec.podSelector).toEqual({ matchLabels: temporal.spec.template.metadata.labels });
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    // The operator dials the frontend Service, whose target is the one port admitted.
    const frontend = find(objects, 'Service', 'temporal-frontend');
    expect(frontend.spec.selector).toEqual(temporal.spec.template.metadata.labels);
    expect(frontend.spec.ports.map((p: { targetPort: string }) => p.targetPort)).toEqual(['grpc']);
    expect(policy.spec.ingress).toEqual([
      {
        ports: [{ port: 'grpc' }],
        from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': operator.metadata.namespace } },
            podSelector: { matchLabels: operator.spec.template.metadata.labels },
          },
          { podSelector: { matchLabels: { 'batch.kubernetes.io/job-name': job.metadata.name } } },
          { podSelector: { matchLabels: temporal.spec.template.metadata.labels } },
        ],
      },
    ]);
    expect(job.metadata.namespace).toBe(policy.metadata.namespace);
  });

  it('admits nothing to the Web UI: it is reached by kubectl port-forward, through the kubelet', () => {
    const ui = find(objects, 'Service', 'temporal-web').spec.ports[0].targetPort;
    expect(temporal.spec.template.spec.containers[0].ports.map((p: { name: string }) => p.name)).toContain(ui);
    const admitted = policies.flatMap((p) => p.spec.ingress.flatMap((r: { ports?: { port: string }[] }) => r.ports));
    expect(admitted).not.toContain(undefined); // a rule without ports would admit every port
    expect(admitted.map((p) => p.port)).not.toContain(ui);
  });

  it("matches the label the apiserver puts on the search-attribute Job's Pods", () => {
    // In namespace default: the shared stack's namespace temporal may hold the end-to-end test's Job.
    const dryRun = { ...job, metadata: { ...job.metadata, namespace: 'default' } };
    const created = JSON.parse(
      kubectlRun(stack, ['create', '--dry-run=server', '-o', 'json', '-f', '-'], JSON.stringify(dryRun)),
    ) as Rendered;
    expect(created.spec.template.metadata.labels).toMatchObject({ 'batch.kubernetes.io/job-name': job.metadata.name });
  });
});

/** Replaces the values of the given flags (each must be present) in a container's args. */
function withFlags(args: string[], values: Record<string, string>): string[] {
  const out = [...args];
  for (const [flag, value] of Object.entries(values)) {
    const i = out.indexOf(flag);
    expect(i, `${flag} in ${args.join(' ')}`).toBeGreaterThanOrEqual(0);
    out[i + 1] = value;
  }
  return out;
}

describe('the all-in-one Temporal server, its command run as written (on loopback)', () => {
  const objects = render(installs['all-in-one']!);
  const server = find(objects, 'Deployment', 'temporal').spec.template.spec.containers[0];
  const job = find(objects, 'Job', 'temporal-search-attributes').spec.template.spec.containers[0];
  const cli = stack.binaries.temporal;
  let child: ChildProcess;
  let dataDir: string;
  let address: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'mmo-temporal-'));
    const [port, uiPort, httpPort, metricsPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    address = `127.0.0.1:${port}`;
    const args = withFlags(server.args, {
      '--ip': '127.0.0.1',
      '--port': String(port),
      '--ui-port': String(uiPort),
      '--http-port': String(httpPort),
      '--metrics-port': String(metricsPort),
      '--db-filename': path.join(dataDir, path.basename(server.args[server.args.indexOf('--db-filename') + 1])),
    });
    child = spawn(cli, args, { stdio: 'ignore' });
  });

  afterAll(() => {
    child?.kill('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs the image of the Temporal CLI version the tests use', () => {
    expect(server.image).toBe(`temporalio/temporal:${temporalCli.version}`);
    expect(job.image).toBe(server.image);
  });

  it('serves, and its readiness probe asks a health service that answers SERVING', async () => {
    const probe = find(objects, 'Deployment', 'temporal').spec.template.spec.containers[0].readinessProbe.grpc;
    expect(server.ports.find((p: { name: string }) => p.name === 'grpc').containerPort).toBe(probe.port);
    const connection = await eventually(
      'the server to accept connections',
      () => Connection.connect({ address }),
      60_000,
    );
    try {
      const answer = await connection.healthService.check({ service: probe.service });
      expect(answer.status).toBe(1); // SERVING
    } finally {
      await connection.close();
    }
  }, 90_000);

  it('registers exactly the search attributes the workflows set, again without harm when re-applied', () => {
    const frontend = find(objects, 'Service', 'temporal-frontend');
    const [, port] = job.args[job.args.indexOf('--address') + 1].split(':');
    expect(job.args[job.args.indexOf('--address') + 1]).toBe(
      `${frontend.metadata.name}.${frontend.metadata.namespace}:${port}`,
    );
    const args = withFlags(job.args, { '--address': address });
    execFileSync(cli, args, { stdio: 'pipe' });
    execFileSync(cli, args, { stdio: 'pipe' });
    const namespace = job.args[job.args.indexOf('--namespace') + 1];
    const listed = JSON.parse(
      execFileSync(
        cli,
        ['operator', 'search-attribute', 'list', '--address', address, '--namespace', namespace, '-o', 'json'],
        { encoding: 'utf8' },
      ),
    ) as { customAttributes: Record<string, string> };
    const custom = Object.entries(listed.customAttributes).filter(([n]) => n.startsWith('MachineModel'));
    expect(Object.fromEntries(custom)).toEqual(
      Object.fromEntries(operatorSearchAttributes.map((key) => [key.name, `INDEXED_VALUE_TYPE_${key.type}`])),
    );
  }, 60_000);
});
