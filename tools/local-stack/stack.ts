import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import path from 'node:path';
import { binaryPath, cacheRoot, caddy, kubeLocal, kubectl, temporalCli, temporalTestServer } from './components.js';
import { ensureInstalled, PrerequisiteError } from './install.js';
import { componentKubeconfigArgs, writeKubeconfig } from './kubeconfig.js';
import { ensurePki, frontProxyClientName, metricsServerUser, type Pki } from './pki.js';
import { metricsServerArgs, metricsServerObjects, nodeMetricsAnnotation } from './metrics-server.js';
import {
  cleanUpRealNode,
  loadImage,
  realNodeName,
  realNodeUnavailable,
  startRealNode,
  type RealNodeInfo,
} from './real-node.js';
import { allImages, modelServerImage, pauseImage } from '../images/catalog.js';
import { ensureImageArchive, extractImageFile, imageNames } from '../images/build.js';
import {
  exposeToPods,
  sampleModelInImage,
  seedSampleModel,
  startObjectStore,
  type ObjectStoreInfo,
} from './object-store.js';
import {
  freePort,
  isRunning,
  portInUse,
  startProcess,
  stopProcess,
  waitUntil,
  type ManagedProcess,
} from './processes.js';
import { startTemporalDevServer, temporalServing } from './temporal-dev-server.js';
import { removePostgresData, startPostgresTemporal, type TemporalKind } from './temporal-postgres.js';

export const fakeNodeName = 'kwok-node-0';
/** The extended resource the fake node advertises, so models that ask for GPUs schedule. */
export const gpuResourceName = 'nvidia.com/gpu';

export interface StackOptions {
  /** Holds data, logs, credentials and stack.json. */
  stateDir: string;
  /** `fixed`: well-known ports a person can remember (overridable by env); `auto`: free ports, for tests. */
  ports: 'fixed' | 'auto';
  /** Wipe etcd and Temporal data first (tests want a clean slate; a person's stack keeps its data). */
  fresh?: boolean;
  /**
   * Run metrics-server so autoscalers can act (the default). The benchmarks leave it out: its scrape
   * of every pod every 10 s is load that none of the contenders they compare causes.
   */
  podMetrics?: boolean;
  /**
   * Run a real node (kubelet, containerd, runc) beside the KWOK node, with the images of
   * tools/images loaded, where the machine allows (the default). The benchmarks leave it out.
   */
  realNode?: boolean;
  /** `dev` (the default): the Temporal CLI's dev server on SQLite, with the Web UI; `postgres`: the server on PostgreSQL. */
  temporal?: TemporalKind;
  /**
   * Run the object store with the digits model in a bucket (the default). The test tier starts it in
   * the files that need it (startStackObjectStore), so a fresh machine's build of it waits for no other.
   */
  objectStore?: boolean;
  log?: (line: string) => void;
}

export interface Ports {
  etcd: number;
  etcdPeer: number;
  apiserver: number;
  controllerManager: number;
  scheduler: number;
  kwok: number;
  metricsServer: number;
  temporal: number;
  temporalHttp: number;
  temporalMetrics: number;
  temporalUi: number;
}

/** What a test or the operator needs to use the stack; also what stack.json holds. */
export interface StackInfo {
  stateDir: string;
  /** Admin kubeconfig: ours, or the user's KUBECONFIG when that was set. */
  kubeconfig: string;
  managesKube: boolean;
  temporalAddress: string;
  temporalNamespace: string;
  /** Web UI base URL, when the stack runs the dev server. */
  temporalUiUrl?: string;
  managesTemporal: boolean;
  /** Which Temporal the stack runs (stacks started before this field existed ran the dev server). */
  temporalKind?: TemporalKind;
  ports: Ports;
  binaries: { kubectl: string; caddy: string; temporal: string; temporalTestServer: string };
  processes: ManagedProcess[];
  /** The real node, when the stack runs one. */
  realNode?: RealNodeInfo;
  /** Why the stack runs simulated pods only, when it does. */
  simulatedOnly?: string;
  /** The object store, when the stack runs one. */
  objectStore?: ObjectStoreInfo;
}

export const defaultStateDir = process.env.MMO_STACK_DIR ?? path.join(cacheRoot, 'stack');

/** Every port of the stack: what listens on it, the variable that moves it, its fixed default. */
const portSettings: Record<keyof Ports, { what: string; env: string; fallback: number; part: 'kube' | 'temporal' }> = {
  etcd: { what: 'etcd', env: 'MMO_ETCD_PORT', fallback: 23790, part: 'kube' },
  etcdPeer: { what: 'etcd peer', env: 'MMO_ETCD_PEER_PORT', fallback: 23800, part: 'kube' },
  apiserver: { what: 'kube-apiserver', env: 'MMO_APISERVER_PORT', fallback: 16443, part: 'kube' },
  controllerManager: {
    what: 'kube-controller-manager',
    env: 'MMO_CONTROLLER_MANAGER_PORT',
    fallback: 10257,
    part: 'kube',
  },
  scheduler: { what: 'kube-scheduler', env: 'MMO_SCHEDULER_PORT', fallback: 10259, part: 'kube' },
  kwok: { what: 'kwok', env: 'MMO_KWOK_PORT', fallback: 10247, part: 'kube' },
  metricsServer: { what: 'metrics-server', env: 'MMO_METRICS_SERVER_PORT', fallback: 4443, part: 'kube' },
  temporal: { what: 'Temporal frontend', env: 'MMO_TEMPORAL_PORT', fallback: 7233, part: 'temporal' },
  temporalHttp: { what: 'Temporal HTTP API', env: 'MMO_TEMPORAL_HTTP_PORT', fallback: 7243, part: 'temporal' },
  temporalMetrics: { what: 'Temporal metrics', env: 'MMO_TEMPORAL_METRICS_PORT', fallback: 7244, part: 'temporal' },
  temporalUi: { what: 'Temporal Web UI', env: 'MMO_TEMPORAL_UI_PORT', fallback: 8233, part: 'temporal' },
};
const portKeys = Object.keys(portSettings) as (keyof Ports)[];

const fixedPorts = Object.fromEntries(
  portKeys.map((k) => [k, envPort(portSettings[k].env, portSettings[k].fallback)]),
) as unknown as Ports;

/** A port from the environment variable `name`, else `fallback`; anything else is a prerequisite error. */
export function envPort(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new PrerequisiteError(`${name}=${raw} is not a port number (1-65535).`);
  return port;
}

function stateFile(stateDir: string): string {
  return path.join(stateDir, 'stack.json');
}

export function readStack(stateDir: string = defaultStateDir): StackInfo | undefined {
  const file = stateFile(stateDir);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, 'utf8')) as StackInfo;
}

function saveStack(info: StackInfo): void {
  writeFileSync(stateFile(info.stateDir), JSON.stringify(info, null, 2) + '\n');
}

/**
 * Brings the stack up, or returns the running one unchanged. A stack that is partly running is
 * stopped and started again; a failed start stops whatever it started and reports the failing
 * component with the tail of its log.
 */
export async function up(opts: StackOptions): Promise<StackInfo> {
  const log = opts.log ?? ((line: string) => console.error(line));
  mkdirSync(opts.stateDir, { recursive: true });
  const existing = readStack(opts.stateDir);
  const temporalKind = opts.temporal ?? 'dev';
  if (existing && (await healthy(existing))) {
    const running = existing.temporalKind ?? 'dev';
    if (existing.managesTemporal && !process.env.TEMPORAL_ADDRESS && running !== temporalKind)
      throw new PrerequisiteError(
        `the stack in ${opts.stateDir} runs the ${running} Temporal, not the ${temporalKind} one asked for: ` +
          'stop it first (npm run stack:down).',
      );
    log(`stack already up (${opts.stateDir})`);
    return existing;
  }
  if (existing) {
    log('stack is partly running: stopping it before starting again');
    await down(opts.stateDir);
  }

  const managesKube = !process.env.KUBECONFIG;
  const managesTemporal = !process.env.TEMPORAL_ADDRESS;
  const binaries = {
    kubectl: await ensureInstalled(kubectl, log),
    caddy: await ensureInstalled(caddy, log),
    temporal: await ensureInstalled(temporalCli, log),
    temporalTestServer: await ensureInstalled(temporalTestServer, log),
  };
  const kubeBin = managesKube ? await ensureInstalled(kubeLocal, log) : '';
  const ports = opts.ports === 'fixed' ? fixedPorts : await autoPorts();
  if (opts.ports === 'fixed') await requireFreePorts(ports, managesKube, managesTemporal);
  if (opts.fresh) {
    for (const d of ['etcd', 'temporal.db', 'logs'])
      rmSync(path.join(opts.stateDir, d), { recursive: true, force: true });
    removePostgresData(opts.stateDir);
  }
  mkdirSync(path.join(opts.stateDir, 'logs'), { recursive: true });

  const info: StackInfo = {
    stateDir: opts.stateDir,
    kubeconfig: process.env.KUBECONFIG ?? path.join(opts.stateDir, 'admin.kubeconfig'),
    managesKube,
    temporalAddress: process.env.TEMPORAL_ADDRESS ?? `127.0.0.1:${ports.temporal}`,
    temporalNamespace: process.env.TEMPORAL_NAMESPACE ?? 'default',
    // The server built from its module has no Web UI (the CLI's dev server embeds one).
    temporalUiUrl: managesTemporal && temporalKind === 'dev' ? `http://127.0.0.1:${ports.temporalUi}` : undefined,
    managesTemporal,
    temporalKind: managesTemporal ? temporalKind : undefined,
    ports,
    binaries,
    processes: [],
  };
  const started = recordStarted(info);
  try {
    // Temporal comes up while the control plane does; both must have finished before a failure stops them.
    const temporal = managesTemporal
      ? startTemporal(info, temporalKind, started, log)
      : Promise.resolve(log(`using the existing Temporal at TEMPORAL_ADDRESS=${info.temporalAddress}`));
    const kube = managesKube
      ? startKube(info, kubeBin, started, log, opts.podMetrics ?? true, opts.realNode ?? true)
      : Promise.resolve(log(`using the existing cluster of KUBECONFIG=${info.kubeconfig}`));
    const failed = (await Promise.allSettled([temporal, kube])).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    if ((opts.objectStore ?? true) && managesKube) await startStackObjectStore(info, started, log);
  } catch (err) {
    log(`stack failed to start; stopping what was started`);
    await down(opts.stateDir);
    throw err;
  }
  saveStack(info);
  log(
    `stack up: kubeconfig ${info.kubeconfig}, Temporal ${info.temporalAddress}` +
      (info.temporalUiUrl ? `, Web UI ${info.temporalUiUrl}` : ''),
  );
  return info;
}

/** Records each process as it starts, in stack.json too, so that `down` stops it even after a failed start. */
function recordStarted(info: StackInfo): (p: ManagedProcess) => ManagedProcess {
  return (p) => {
    info.processes.push(p);
    saveStack(info);
    return p;
  };
}

/**
 * Starts the object store of a running stack (unless it runs one), reachable from the real node's Pods
 * and holding the digits model, and records it in stack.json.
 */
export async function startStackObjectStore(
  info: StackInfo,
  started: (p: ManagedProcess) => ManagedProcess = recordStarted(info),
  log: (line: string) => void = (line) => console.error(line),
): Promise<ObjectStoreInfo> {
  if (info.objectStore) return info.objectStore;
  log('starting the object store (SeaweedFS)');
  const store = await startObjectStore(
    { stateDir: info.stateDir, logFile: logFile(info, 'object-store'), log },
    started,
  );
  if (info.realNode) {
    exposeToPods(
      store,
      {
        nodeIp: info.realNode.nodeIp,
        apply: (objects) =>
          kubectlRun(
            info,
            ['apply', '--server-side', '--force-conflicts', '-f', '-'],
            JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }),
          ),
        logFile: logFile(info, 'object-store-forwarder'),
      },
      started,
    );
    const model = path.join(info.stateDir, 'object-store', 'digits.joblib');
    await extractImageFile(modelServerImage, sampleModelInImage, model, log);
    await seedSampleModel(store, model);
  }
  info.objectStore = store;
  saveStack(info);
  return store;
}

/** Stops every process of the stack (in reverse start order) and forgets them; data stays unless `purge`. */
export async function down(stateDir: string = defaultStateDir, purge = false): Promise<void> {
  const info = readStack(stateDir);
  if (info) {
    if (info.realNode) {
      await cleanUpRealNode(info.realNode, info.processes);
      releaseRealNode(stateDir);
    }
    for (const p of [...info.processes].reverse()) await stopProcess(p);
    rmSync(stateFile(stateDir), { force: true });
  }
  if (purge) {
    rmSync(stateDir, { recursive: true, force: true });
    removePostgresData(stateDir);
  }
}

export async function healthy(info: StackInfo): Promise<boolean> {
  if (!info.processes.every(isRunning)) return false;
  if (info.managesKube && !(await httpOk(`https://127.0.0.1:${info.ports.apiserver}/readyz`, caFile(info))))
    return false;
  if (info.managesTemporal && !(await temporalServing(info.binaries.temporal, info.temporalAddress))) return false;
  return true;
}

async function autoPorts(): Promise<Ports> {
  const entries = await Promise.all(portKeys.map(async (k) => [k, await freePort()] as const));
  return Object.fromEntries(entries) as unknown as Ports;
}

async function requireFreePorts(ports: Ports, kube: boolean, temporal: boolean): Promise<void> {
  for (const key of portKeys) {
    const { what, env, part } = portSettings[key];
    if ((part === 'kube' ? kube : temporal) && (await portInUse(ports[key]))) {
      throw new PrerequisiteError(
        `port ${ports[key]} for ${what} is in use: free it, choose another with ${env}=<port>, ` +
          'or point KUBECONFIG/TEMPORAL_ADDRESS at an existing cluster/Temporal.',
      );
    }
  }
}

function caFile(info: StackInfo): string {
  return path.join(info.stateDir, 'pki', 'ca.crt');
}

function logFile(info: StackInfo, name: string): string {
  return path.join(info.stateDir, 'logs', `${name}.log`);
}

/** Starts the stack's Temporal of `kind` and resolves once it serves the operator's namespace. */
async function startTemporal(
  info: StackInfo,
  kind: TemporalKind,
  started: (p: ManagedProcess) => ManagedProcess,
  log: (line: string) => void,
): Promise<void> {
  const p = info.ports;
  if (kind === 'postgres') {
    await startPostgresTemporal(
      {
        cliBinary: info.binaries.temporal,
        stateDir: info.stateDir,
        logDir: path.join(info.stateDir, 'logs'),
        ports: { grpc: p.temporal, http: p.temporalHttp, metrics: p.temporalMetrics },
        namespace: info.temporalNamespace,
        log,
      },
      started,
    );
    return;
  }
  const temporal = started(
    startTemporalDevServer({
      binary: info.binaries.temporal,
      ports: { grpc: p.temporal, http: p.temporalHttp, metrics: p.temporalMetrics, ui: p.temporalUi },
      dbFile: path.join(info.stateDir, 'temporal.db'),
      namespace: info.temporalNamespace,
      logFile: logFile(info, 'temporal'),
    }),
  );
  await waitUntil(temporal, 'serving', () => temporalServing(info.binaries.temporal, info.temporalAddress), 60_000);
  await waitUntil(temporal, 'serving its Web UI', () => httpOk(`${info.temporalUiUrl}/`), 30_000);
}

async function startKube(
  info: StackInfo,
  bin: string,
  started: (p: ManagedProcess) => ManagedProcess,
  log: (line: string) => void,
  podMetrics: boolean,
  realNode: boolean,
): Promise<void> {
  const p = info.ports;
  const dir = info.stateDir;
  const pki = ensurePki(path.join(dir, 'pki'));
  const server = `https://127.0.0.1:${p.apiserver}`;
  writeKubeconfig(info.kubeconfig, server, pki.caCert, 'admin', pki.tokens.admin);
  const kcmConfig = path.join(dir, 'controller-manager.kubeconfig');
  writeKubeconfig(kcmConfig, server, pki.caCert, 'system:kube-controller-manager', pki.tokens.controllerManager);
  const schedConfig = path.join(dir, 'scheduler.kubeconfig');
  writeKubeconfig(schedConfig, server, pki.caCert, 'system:kube-scheduler', pki.tokens.scheduler);
  const metricsConfig = path.join(dir, 'metrics-server.kubeconfig');
  writeKubeconfig(metricsConfig, server, pki.caCert, metricsServerUser, pki.tokens.metricsServer);

  log('starting etcd');
  const etcdUrl = `http://127.0.0.1:${p.etcd}`;
  const peerUrl = `http://127.0.0.1:${p.etcdPeer}`;
  const etcd = started(
    startProcess(
      'etcd',
      bin,
      [
        'etcd',
        '--name',
        'local',
        '--data-dir',
        path.join(dir, 'etcd'),
        '--listen-client-urls',
        etcdUrl,
        '--advertise-client-urls',
        etcdUrl,
        '--listen-peer-urls',
        peerUrl,
        '--initial-advertise-peer-urls',
        peerUrl,
        '--initial-cluster',
        `local=${peerUrl}`,
        '--listen-metrics-urls',
        '',
        '--unsafe-no-fsync',
        '--log-level',
        'warn',
      ],
      logFile(info, 'etcd'),
    ),
  );
  await waitUntil(etcd, 'healthy', () => httpOk(`${etcdUrl}/health`), 30_000);

  log('starting kube-apiserver');
  const apiserver = started(
    startProcess(
      'kube-apiserver',
      bin,
      [
        'kube-apiserver',
        '--etcd-servers',
        etcdUrl,
        '--bind-address',
        '127.0.0.1',
        '--advertise-address',
        '127.0.0.1',
        '--secure-port',
        String(p.apiserver),
        '--tls-cert-file',
        pki.apiserver.cert,
        '--tls-private-key-file',
        pki.apiserver.key,
        '--client-ca-file',
        pki.caCert,
        '--token-auth-file',
        pki.tokenFile,
        '--authorization-mode',
        'Node,RBAC',
        // A namespace's annotations may pin its pods to a node and give them tolerations: how
        // workloads choose the real node (see real-node.ts).
        '--enable-admission-plugins',
        'NodeRestriction,PodNodeSelector,PodTolerationRestriction',
        '--kubelet-client-certificate',
        pki.kubeletClient.cert,
        '--kubelet-client-key',
        pki.kubeletClient.key,
        '--kubelet-preferred-address-types',
        'InternalIP',
        '--service-account-issuer',
        'https://kubernetes.default.svc.cluster.local',
        '--service-account-key-file',
        pki.serviceAccountPub,
        '--service-account-signing-key-file',
        pki.serviceAccountKey,
        '--service-cluster-ip-range',
        '10.96.0.0/16',
        '--endpoint-reconciler-type',
        'none',
        // The aggregation layer, for metrics-server: the apiserver proxies with this client cert and
        // the aggregated server trusts the user it names in these headers.
        '--proxy-client-cert-file',
        pki.frontProxyClient.cert,
        '--proxy-client-key-file',
        pki.frontProxyClient.key,
        '--requestheader-client-ca-file',
        pki.caCert,
        '--requestheader-allowed-names',
        frontProxyClientName,
        '--requestheader-username-headers',
        'X-Remote-User',
        '--requestheader-group-headers',
        'X-Remote-Group',
        '--requestheader-extra-headers-prefix',
        'X-Remote-Extra-',
        '--allow-privileged',
        // Server-side sharded list and watch (KEP-5866, alpha): replicas with --shards are sent only
        // their shards' objects. MMO_SHARDED_LIST_AND_WATCH=false turns it off, to prove the
        // operator's client-side filter alone.
        '--feature-gates',
        `ShardedListAndWatch=${process.env.MMO_SHARDED_LIST_AND_WATCH === 'false' ? 'false' : 'true'}`,
        '--profiling=false',
        '--cert-dir',
        path.join(dir, 'apiserver-certs'),
      ],
      logFile(info, 'kube-apiserver'),
    ),
  );
  await waitUntil(apiserver, 'ready', () => httpOk(`${server}/readyz`, pki.caCert), 90_000);

  log('starting kube-controller-manager, kube-scheduler and kwok');
  const component = (name: string, kubeconfig: string, port: number) =>
    started(
      startProcess(
        name,
        bin,
        [
          name,
          ...componentKubeconfigArgs(kubeconfig),
          '--bind-address',
          '127.0.0.1',
          '--secure-port',
          String(port),
          '--cert-dir',
          path.join(dir, `${name}-certs`),
          '--leader-elect=false',
          ...(name === 'kube-controller-manager'
            ? [
                '--service-account-private-key-file',
                pki.serviceAccountKey,
                '--root-ca-file',
                pki.caCert,
                '--use-service-account-credentials',
                '--cluster-name',
                'machinemodel-local',
              ]
            : []),
        ],
        logFile(info, name),
      ),
    );
  const kcm = component('kube-controller-manager', kcmConfig, p.controllerManager);
  const scheduler = component('kube-scheduler', schedConfig, p.scheduler);
  const kwok = started(startKwok(info, bin, pki));
  await waitUntil(kcm, 'healthy', () => httpOk(`https://127.0.0.1:${p.controllerManager}/healthz`, 'insecure'), 60_000);
  await waitUntil(scheduler, 'healthy', () => httpOk(`https://127.0.0.1:${p.scheduler}/healthz`, 'insecure'), 60_000);
  await waitUntil(kwok, 'healthy', () => httpOk(`https://127.0.0.1:${p.kwok}/healthz`, pki.caCert), 60_000);

  applyFakeNode(info);
  await waitUntil(kwok, `marking node ${fakeNodeName} Ready`, async () => nodeReady(info, fakeNodeName), 60_000);

  if (realNode) await startRealNodeIfAllowed(info, bin, pki, server, started, log);

  if (!podMetrics) return;
  log('starting metrics-server');
  kubectlRun(
    info,
    ['apply', '--server-side', '--force-conflicts', '-f', '-'],
    JSON.stringify(metricsServerObjects(pki, p.metricsServer)),
  );
  const metricsServer = started(
    startProcess(
      'metrics-server',
      bin,
      metricsServerArgs(pki, metricsConfig, p.metricsServer),
      logFile(info, 'metrics-server'),
    ),
  );
  await waitUntil(
    metricsServer,
    'live',
    () => httpOk(`https://127.0.0.1:${p.metricsServer}/livez`, pki.caCert),
    60_000,
  );
}

/** One real node per machine: its kube-proxy owns the host's KUBE- iptables chains. */
const realNodeLock = '/run/machinemodel-operator-real-node';

async function startRealNodeIfAllowed(
  info: StackInfo,
  bin: string,
  pki: Pki,
  server: string,
  started: (p: ManagedProcess) => ManagedProcess,
  log: (line: string) => void,
): Promise<void> {
  const holder = existsSync(realNodeLock) ? readFileSync(realNodeLock, 'utf8').trim() : undefined;
  const other = holder && holder !== info.stateDir ? readStack(holder) : undefined;
  const reason =
    realNodeUnavailable() ??
    (other?.realNode && other.processes.some((p) => p.name === 'kubelet' && isRunning(p))
      ? `the stack in ${holder} runs this machine's real node`
      : undefined);
  if (reason) {
    info.simulatedOnly = reason;
    log(`no real node: ${reason}; pods are simulated (KWOK) only`);
    return;
  }
  writeFileSync(realNodeLock, info.stateDir);
  const started0 = Date.now();
  const archives = [];
  for (const image of allImages) archives.push({ image, archive: await ensureImageArchive(image, log) });
  info.realNode = await startRealNode({
    stateDir: info.stateDir,
    kubeBin: bin,
    pki,
    server,
    adminKubeconfig: info.kubeconfig,
    apply: (obj) => kubectlRun(info, ['apply', '--server-side', '--force-conflicts', '-f', '-'], JSON.stringify(obj)),
    pauseArchive: archives.find((a) => a.image === pauseImage)!.archive,
    pauseImage: pauseImage.ref,
    logFile: (name) => logFile(info, name),
    started,
    log,
    nodeReady: () => nodeReady(info, realNodeName),
  });
  saveStack(info);
  // As on the KWOK node, GPUs are an extended resource with nothing behind them: models that ask for
  // one (the seed example does) schedule, and run on the CPU.
  const gpus = [{ op: 'add', path: `/status/capacity/${gpuResourceName.replace('/', '~1')}`, value: '4' }];
  kubectlRun(info, ['patch', 'node', realNodeName, '--subresource=status', '--type=json', '-p', JSON.stringify(gpus)]);
  for (const { image, archive } of archives) loadImage(info.realNode, archive, imageNames(image));
  log(`real node ${realNodeName} up in ${Math.round((Date.now() - started0) / 1000)}s with ${archives.length} images`);
}

function releaseRealNode(stateDir: string): void {
  if (existsSync(realNodeLock) && readFileSync(realNodeLock, 'utf8').trim() === stateDir) rmSync(realNodeLock);
}

function startKwok(info: StackInfo, bin: string, pki: Pki): ManagedProcess {
  const stages = path.join(info.stateDir, 'kwok-stages.yaml');
  writeFileSync(stages, execFileSync(bin, ['kwok-stages'], { encoding: 'utf8' }));
  return startProcess(
    'kwok',
    bin,
    [
      'kwok',
      '--kubeconfig',
      info.kubeconfig,
      '--config',
      stages,
      '--manage-all-nodes=false',
      '--manage-nodes-with-annotation-selector',
      'kwok.x-k8s.io/node=fake',
      '--cidr',
      '10.244.0.1/16',
      // The fake node's kubelet is kwok itself: metrics-server scrapes the node's address and port.
      '--node-ip',
      '127.0.0.1',
      '--node-port',
      String(info.ports.kwok),
      '--tls-cert-file',
      pki.kwok.cert,
      '--tls-private-key-file',
      pki.kwok.key,
      '--node-lease-duration-seconds',
      '40',
      '--server-address',
      `127.0.0.1:${info.ports.kwok}`,
    ],
    logFile(info, 'kwok'),
  );
}

/** CPU and memory grow with the pod count (a model requests 100m and 128Mi), so pods stay the limit. */
function fakeNodeCapacity(pods: number) {
  return {
    cpu: String(Math.max(64, pods)),
    memory: `${Math.max(512, pods)}Gi`,
    pods: String(pods),
    [gpuResourceName]: '16',
  };
}

/** Room for `pods` pods on the fake node: its status, through the status subresource (apply ignores status). */
export function resizeFakeNode(info: StackInfo, pods: number): void {
  const capacity = fakeNodeCapacity(pods);
  patchFakeNodeStatus(info, { capacity, allocatable: capacity });
}

/** Node status goes through its subresource: apply ignores it on an existing node. */
function patchFakeNodeStatus(info: StackInfo, status: object): void {
  const patch = JSON.stringify({ status });
  kubectlRun(info, ['patch', 'node', fakeNodeName, '--subresource=status', '--type=merge', '-p', patch]);
}

/** One fake node, with room for many models and GPUs as an extended resource. */
function applyFakeNode(info: StackInfo): void {
  const capacity = fakeNodeCapacity(500);
  const node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: fakeNodeName,
      annotations: {
        'kwok.x-k8s.io/node': 'fake',
        'node.alpha.kubernetes.io/ttl': '0',
        ...nodeMetricsAnnotation(fakeNodeName),
      },
      labels: {
        'kubernetes.io/hostname': fakeNodeName,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        type: 'kwok',
      },
    },
    status: { allocatable: capacity, capacity },
  };
  kubectlRun(info, ['apply', '--server-side', '--force-conflicts', '-f', '-'], JSON.stringify(node));
  // Where metrics-server finds the node's kubelet, kwok. kwok keeps what a node has: a node made
  // before the stack ran metrics-server has an unreachable address and no port.
  const addresses = [
    { type: 'InternalIP', address: '127.0.0.1' },
    { type: 'Hostname', address: fakeNodeName },
  ];
  const daemonEndpoints = { kubeletEndpoint: { Port: info.ports.kwok } };
  patchFakeNodeStatus(info, { addresses, daemonEndpoints });
}

function nodeReady(info: StackInfo, node: string): boolean {
  try {
    const out = kubectlRun(info, [
      'get',
      'node',
      node,
      '-o',
      'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
    ]);
    return out.trim() === 'True';
  } catch {
    return false;
  }
}

export function kubectlRun(info: StackInfo, args: string[], input?: string): string {
  return execFileSync(info.binaries.kubectl, ['--kubeconfig', info.kubeconfig, ...args], {
    encoding: 'utf8',
    input,
    stdio: ['pipe', 'pipe', 'pipe'],
    // Lists of a thousand objects and the apiserver's /metrics exceed the 1 MiB default.
    maxBuffer: 256 * 1024 * 1024,
  });
}

/** GET that resolves true on HTTP 200; `ca` is a CA file, or 'insecure' for components' self-signed serving certs. */
function httpOk(url: string, ca?: string): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => resolve(ok);
    const onResponse = (res: http.IncomingMessage) => {
      res.resume();
      done(res.statusCode === 200);
    };
    const req = url.startsWith('https:')
      ? https.get(
          url,
          ca === 'insecure' ? { rejectUnauthorized: false } : { ca: ca ? readFileSync(ca) : undefined },
          onResponse,
        )
      : http.get(url, onResponse);
    req.setTimeout(3_000, () => req.destroy());
    req.on('error', () => done(false));
  });
}
