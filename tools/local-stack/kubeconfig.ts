import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import YAML from 'yaml';

interface ClusterEntry {
  server: string;
  'certificate-authority-data': string;
}

/** Writes a kubeconfig with one cluster, one bearer-token user and one current context. */
function write(file: string, cluster: ClusterEntry, user: string, token: string, namespace: string): void {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'machinemodel-local', cluster }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: 'machinemodel-local', user, namespace } }],
    'current-context': user,
  };
  writeFileSync(file, YAML.stringify(config), { mode: 0o600 });
}

export function writeKubeconfig(file: string, server: string, caCertFile: string, user: string, token: string): void {
  write(
    file,
    { server, 'certificate-authority-data': readFileSync(caCertFile).toString('base64') },
    user,
    token,
    'default',
  );
}

/**
 * Writes a kubeconfig that acts as a ServiceAccount, with a token from the TokenRequest API, so RBAC
 * rules written for the operator's ServiceAccount can be proven against the real authorizer.
 */
export function writeServiceAccountKubeconfig(opts: {
  kubectl: string;
  adminKubeconfig: string;
  namespace: string;
  serviceAccount: string;
  file: string;
}): void {
  const token = execFileSync(
    opts.kubectl,
    [
      '--kubeconfig',
      opts.adminKubeconfig,
      'create',
      'token',
      opts.serviceAccount,
      '-n',
      opts.namespace,
      '--duration',
      '24h',
    ],
    { encoding: 'utf8' },
  ).trim();
  const admin = YAML.parse(readFileSync(opts.adminKubeconfig, 'utf8')) as { clusters: { cluster: ClusterEntry }[] };
  const cluster = admin.clusters[0]?.cluster;
  if (!cluster) throw new Error(`${opts.adminKubeconfig} has no cluster`);
  write(opts.file, cluster, opts.serviceAccount, token, opts.namespace);
}

/** The flags a control-plane component (or an aggregated API server) takes to reach, authenticate and authorize through the apiserver. */
export function componentKubeconfigArgs(kubeconfig: string): string[] {
  return [
    '--kubeconfig',
    kubeconfig,
    '--authentication-kubeconfig',
    kubeconfig,
    '--authorization-kubeconfig',
    kubeconfig,
  ];
}
