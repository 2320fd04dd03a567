import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PrerequisiteError } from './install.js';

/**
 * Files of the local cluster's trust: a CA; serving certs for the apiserver, kwok (the fake kubelet)
 * and metrics-server; the client cert the apiserver proxies aggregated APIs with; the service-account
 * key pair; static tokens.
 */
export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiserver: CertPair;
  kwok: CertPair;
  metricsServer: CertPair;
  frontProxyClient: CertPair;
  /** The apiserver's client cert towards kubelets (logs, exec). */
  kubeletClient: CertPair;
  serviceAccountKey: string;
  serviceAccountPub: string;
  tokenFile: string;
  tokens: Tokens;
}

export interface CertPair {
  cert: string;
  key: string;
}

/** The CN the apiserver presents to aggregated API servers; they trust request headers only from it. */
export const frontProxyClientName = 'front-proxy-client';

const apiserverNames = [
  'IP:127.0.0.1',
  'IP:10.96.0.1',
  'DNS:localhost',
  'DNS:kubernetes',
  'DNS:kubernetes.default',
  'DNS:kubernetes.default.svc',
  'DNS:kubernetes.default.svc.cluster.local',
];

/** Static token identities: one admin (system:masters) and one per component, under their RBAC names. */
const tokenUsers = {
  admin: { user: 'admin', groups: 'system:masters' },
  controllerManager: { user: 'system:kube-controller-manager', groups: '' },
  scheduler: { user: 'system:kube-scheduler', groups: '' },
  metricsServer: { user: 'system:metrics-server', groups: '' },
  // The real node's kubelet (the Node authorizer knows it by this name) and kube-proxy.
  node: { user: 'system:node:real-node-0', groups: 'system:nodes' },
  kubeProxy: { user: 'system:kube-proxy', groups: '' },
};
type Tokens = Record<keyof typeof tokenUsers, string>;
export const metricsServerUser = tokenUsers.metricsServer.user;

/** Creates what is missing and keeps what exists, so restarts keep the same identity and clients stay valid. */
export function ensurePki(dir: string): Pki {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const f = (name: string) => path.join(dir, name);
  const caCert = f('ca.crt');
  const caKey = f('ca.key');
  if (!existsSync(caCert)) {
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      caKey,
      '-out',
      caCert,
      '-days',
      '3650',
      '-subj',
      '/CN=machinemodel-local-ca',
    );
  }
  const leaf = (name: string, cn: string, extensions: string): CertPair =>
    ensureLeaf(f(name), cn, extensions, caCert, caKey);
  const serving = (names: string[]) => `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth\n`;
  const pki: Pki = {
    dir,
    caCert,
    caKey,
    apiserver: leaf('apiserver', 'kube-apiserver', serving(apiserverNames)),
    kwok: leaf('kwok', 'kwok', serving(['IP:127.0.0.1', 'DNS:localhost'])),
    // The apiserver checks an aggregated API server's cert against its Service's DNS name.
    metricsServer: leaf(
      'metrics-server',
      'metrics-server',
      serving(['DNS:metrics-server.kube-system.svc', 'IP:127.0.0.1']),
    ),
    frontProxyClient: leaf('front-proxy-client', frontProxyClientName, 'extendedKeyUsage=clientAuth\n'),
    kubeletClient: leaf('apiserver-kubelet-client', 'kube-apiserver-kubelet-client', 'extendedKeyUsage=clientAuth\n'),
    serviceAccountKey: f('sa.key'),
    serviceAccountPub: f('sa.pub'),
    tokenFile: f('tokens.csv'),
    tokens: ensureTokens(f('tokens.csv')),
  };
  if (!existsSync(pki.serviceAccountPub)) {
    openssl('genrsa', '-out', pki.serviceAccountKey, '2048');
    openssl('rsa', '-in', pki.serviceAccountKey, '-pubout', '-out', pki.serviceAccountPub);
  }
  return pki;
}

/** A key and a cert signed by the CA, at `<base>.key` and `<base>.crt`. */
function ensureLeaf(base: string, cn: string, extensions: string, caCert: string, caKey: string): CertPair {
  const pair = { cert: `${base}.crt`, key: `${base}.key` };
  if (existsSync(pair.cert)) return pair;
  writeFileSync(`${base}.ext`, extensions);
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', pair.key, '-out', `${base}.csr`, '-subj', `/CN=${cn}`);
  openssl(
    'x509',
    '-req',
    '-in',
    `${base}.csr`,
    '-CA',
    caCert,
    '-CAkey',
    caKey,
    '-CAcreateserial',
    '-out',
    pair.cert,
    '-days',
    '3650',
    '-extfile',
    `${base}.ext`,
  );
  return pair;
}

/** Reads the token file, adding a row for each identity it lacks (a stack made by an older version). */
function ensureTokens(file: string): Tokens {
  const rows = existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
  const byUser = new Map<string, string>();
  for (const line of rows) {
    const [token, user] = line.split(',');
    if (token && user) byUser.set(user, token);
  }
  const missing = Object.values(tokenUsers).filter(({ user }) => !byUser.has(user));
  for (const { user, groups } of missing) {
    const token = randomBytes(24).toString('hex');
    byUser.set(user, token);
    rows.push(`${token},${user},${user},"${groups}"`);
  }
  if (missing.length > 0) writeFileSync(file, rows.join('\n') + '\n', { mode: 0o600 });
  const tokens = {} as Tokens;
  for (const [key, { user }] of Object.entries(tokenUsers)) tokens[key as keyof Tokens] = byUser.get(user) ?? '';
  return tokens;
}

function openssl(...args: string[]): void {
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PrerequisiteError(
        'openssl is required to create the local cluster certificates: install it (apt-get install openssl).',
      );
    }
    throw err;
  }
}
