import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PrerequisiteError } from './install.js';

/** Files of the local cluster's trust: a CA, the apiserver's serving cert, the service-account key pair, static tokens. */
export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
  tokenFile: string;
  tokens: { admin: string; controllerManager: string; scheduler: string };
}

const apiserverNames = [
  'IP:127.0.0.1',
  'IP:10.96.0.1',
  'DNS:localhost',
  'DNS:kubernetes',
  'DNS:kubernetes.default',
  'DNS:kubernetes.default.svc',
  'DNS:kubernetes.default.svc.cluster.local',
];

/** Creates what is missing and keeps what exists, so restarts keep the same identity and clients stay valid. */
export function ensurePki(dir: string): Pki {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const f = (name: string) => path.join(dir, name);
  const pki: Pki = {
    dir,
    caCert: f('ca.crt'),
    caKey: f('ca.key'),
    apiserverCert: f('apiserver.crt'),
    apiserverKey: f('apiserver.key'),
    serviceAccountKey: f('sa.key'),
    serviceAccountPub: f('sa.pub'),
    tokenFile: f('tokens.csv'),
    tokens: { admin: '', controllerManager: '', scheduler: '' },
  };
  if (!existsSync(pki.caCert)) {
    openssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      pki.caKey,
      '-out',
      pki.caCert,
      '-days',
      '3650',
      '-subj',
      '/CN=machinemodel-local-ca',
    );
  }
  if (!existsSync(pki.apiserverCert)) {
    const csr = f('apiserver.csr');
    const ext = f('apiserver.ext');
    writeFileSync(ext, `subjectAltName=${apiserverNames.join(',')}\nextendedKeyUsage=serverAuth\n`);
    openssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      pki.apiserverKey,
      '-out',
      csr,
      '-subj',
      '/CN=kube-apiserver',
    );
    openssl(
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      pki.caCert,
      '-CAkey',
      pki.caKey,
      '-CAcreateserial',
      '-out',
      pki.apiserverCert,
      '-days',
      '3650',
      '-extfile',
      ext,
    );
  }
  if (!existsSync(pki.serviceAccountPub)) {
    openssl('genrsa', '-out', pki.serviceAccountKey, '2048');
    openssl('rsa', '-in', pki.serviceAccountKey, '-pubout', '-out', pki.serviceAccountPub);
  }
  pki.tokens = ensureTokens(pki.tokenFile);
  return pki;
}

/** Static bearer tokens: one admin (system:masters) and one per control-plane component, under their RBAC identities. */
function ensureTokens(file: string): Pki['tokens'] {
  if (!existsSync(file)) {
    const t = () => randomBytes(24).toString('hex');
    const rows = [
      [t(), 'admin', 'admin', 'system:masters'],
      [t(), 'system:kube-controller-manager', 'system:kube-controller-manager', ''],
      [t(), 'system:kube-scheduler', 'system:kube-scheduler', ''],
    ];
    writeFileSync(
      file,
      rows.map(([token, user, uid, groups]) => `${token},${user},${uid},"${groups}"`).join('\n') + '\n',
      {
        mode: 0o600,
      },
    );
  }
  const byUser = new Map<string, string>();
  for (const line of readFileSync(file, 'utf8').trim().split('\n')) {
    const [token, user] = line.split(',');
    if (token && user) byUser.set(user, token);
  }
  return {
    admin: byUser.get('admin') ?? '',
    controllerManager: byUser.get('system:kube-controller-manager') ?? '',
    scheduler: byUser.get('system:kube-scheduler') ?? '',
  };
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
