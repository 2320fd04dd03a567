import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureDebianPackages } from './debian-packages.js';
import { clusterDns, nodeRuntime } from './components.js';
import { ensureInstalled } from './install.js';
import { writeKubeconfig } from './kubeconfig.js';
import type { Pki } from './pki.js';
import { freePort, startProcess, stopProcess, waitUntil, type ManagedProcess } from './processes.js';

/**
 * The real node: a kubelet with containerd, runc and a CNI bridge, beside the KWOK node. It is
 * tainted, so only pods that tolerate the taint run on it; a namespace opts in with the annotations
 * of `realNodeNamespaceAnnotations` (the apiserver's PodNodeSelector and PodTolerationRestriction
 * admission plugins add the selector and the toleration to every pod in it). Everything else
 * (tests, benchmarks: thousands of models) stays on the KWOK node.
 */
export const realNodeName = 'real-node-0';
export const realNodeTaint = { key: 'machinemodel.local/real-node', value: 'true', effect: 'NoSchedule' };
export const realNodeLabel = { key: 'machinemodel.local/node', value: 'real' };

export const realNodeNamespaceAnnotations = {
  'scheduler.alpha.kubernetes.io/node-selector': `${realNodeLabel.key}=${realNodeLabel.value}`,
  'scheduler.alpha.kubernetes.io/defaultTolerations': JSON.stringify([
    { key: realNodeTaint.key, operator: 'Equal', value: realNodeTaint.value, effect: realNodeTaint.effect },
  ]),
};

/** The same, as `kubectl annotate` takes them. */
export const realNodeAnnotationArgs = Object.entries(realNodeNamespaceAnnotations).map(([k, v]) => `${k}=${v}`);

const debianPackages = ['runc', 'containernetworking-plugins', 'iptables', 'socat', 'buildah', 'mmdebstrap'];

/** What the stack records of its real node, so that `down` (maybe of another process) can undo it. */
export interface RealNodeInfo {
  dir: string;
  /** The host side of the pod network: a bridge whose address is the node's IP. */
  bridge: string;
  subnet: string;
  nodeIp: string;
  /** The CNI network's name: every iptables rule the bridge plugin writes carries it. */
  network: string;
  containerdSocket: string;
  binDir: string;
  kubeletPort: number;
  /** Where pods reach the apiserver (the `kubernetes` Service's endpoint): a forwarder on the node's IP. */
  apiserverPort: number;
  /** The kubelet's root directory (its /var/lib/kubelet): a shared mount, for the model cache's plugin. */
  kubeletDir: string;
  /** The node's model cache (its /var/lib/machinemodel-operator/model-cache). */
  modelCacheDir: string;
}

/** Why this machine cannot run a real node, or undefined when it can. */
export function realNodeUnavailable(): string | undefined {
  if (process.env.MMO_REAL_NODE === '0') return 'MMO_REAL_NODE=0 asks for simulated pods only';
  if (os.platform() !== 'linux') return `a real node needs Linux (this is ${os.platform()})`;
  if (process.getuid?.() !== 0)
    return 'a real node needs root (kubelet, containerd and runc manage cgroups and mounts)';
  if (!existsSync('/sys/fs/cgroup/memory') && !existsSync('/sys/fs/cgroup/cgroup.controllers'))
    return 'a real node needs cgroups mounted at /sys/fs/cgroup';
  return undefined;
}

/** A bridge name and a /24 of its own per stack directory, so two stacks on one machine never share them. */
export function realNodeNetwork(stateDir: string): Pick<RealNodeInfo, 'bridge' | 'subnet' | 'nodeIp' | 'network'> {
  const hash = createHash('sha256').update(stateDir).digest();
  const octet = 1 + (hash[0]! % 250);
  const id = hash.subarray(1, 4).toString('hex');
  return { bridge: `mmo${id}`, subnet: `10.89.${octet}.0/24`, nodeIp: `10.89.${octet}.1`, network: `mmo-${id}` };
}

interface StartOptions {
  stateDir: string;
  kubeBin: string;
  pki: Pki;
  server: string;
  /** The admin kubeconfig: cluster DNS reads Services and EndpointSlices with it. */
  adminKubeconfig: string;
  /** Server-side apply of an object, as the admin. */
  apply: (obj: object) => void;
  /** The pause image, as an OCI archive; loaded before the kubelet starts. */
  pauseArchive: string;
  pauseImage: string;
  logFile: (name: string) => string;
  nodeReady: () => boolean;
  started: (p: ManagedProcess) => ManagedProcess;
  log: (line: string) => void;
}

export async function startRealNode(o: StartOptions): Promise<RealNodeInfo> {
  ensureDebianPackages(debianPackages, o.log);
  const bin = await ensureInstalled(nodeRuntime, o.log);
  const dnsBin = await ensureInstalled(clusterDns, o.log);
  const dir = path.join(o.stateDir, 'real-node');
  const node: RealNodeInfo = {
    dir,
    ...realNodeNetwork(o.stateDir),
    containerdSocket: path.join(dir, 'containerd.sock'),
    binDir: path.dirname(bin),
    kubeletPort: await freePort(),
    apiserverPort: await freePort(),
    kubeletDir: path.join(dir, 'kubelet'),
    modelCacheDir: path.join(dir, 'model-cache'),
  };
  // A node of an earlier run that was killed: undo what it left before starting again.
  await cleanUpRealNode(node);
  mkdirSync(path.join(dir, 'cni'), { recursive: true });
  createBridge(node);
  const env = { PATH: `${node.binDir}:${process.env.PATH}` };

  o.log('starting the real node: containerd');
  writeFileSync(path.join(dir, 'containerd.toml'), containerdConfig(node, o.pauseImage));
  writeFileSync(path.join(dir, 'cni', '10-bridge.conflist'), JSON.stringify(cniConfig(node), null, 2));
  const containerd = o.started(
    startProcess(
      'containerd',
      path.join(node.binDir, 'containerd'),
      ['--config', path.join(dir, 'containerd.toml')],
      o.logFile('containerd'),
      env,
    ),
  );
  await waitUntil(containerd, 'serving', async () => ctr(node, ['version']).ok, 30_000);
  loadImage(node, o.pauseArchive, [o.pauseImage]);

  o.log('starting the real node: kubelet and kube-proxy');
  sharedMount(node.kubeletDir);
  const kubeconfig = path.join(dir, 'kubelet.kubeconfig');
  writeKubeconfig(kubeconfig, o.server, o.pki.caCert, `system:node:${realNodeName}`, o.pki.tokens.node);
  writeFileSync(path.join(dir, 'kubelet.yaml'), JSON.stringify(kubeletConfig(node, o.pki), null, 2));
  const kubelet = o.started(
    startProcess(
      'kubelet',
      o.kubeBin,
      [
        'kubelet',
        '--config',
        path.join(dir, 'kubelet.yaml'),
        '--kubeconfig',
        kubeconfig,
        '--root-dir',
        node.kubeletDir,
        '--hostname-override',
        realNodeName,
        '--node-ip',
        node.nodeIp,
        '--node-labels',
        `${realNodeLabel.key}=${realNodeLabel.value}`,
      ],
      o.logFile('kubelet'),
      env,
    ),
  );
  const proxyConfig = path.join(dir, 'kube-proxy.kubeconfig');
  writeKubeconfig(proxyConfig, o.server, o.pki.caCert, 'system:kube-proxy', o.pki.tokens.kubeProxy);
  o.started(
    startProcess(
      'kube-proxy',
      o.kubeBin,
      [
        'kube-proxy',
        '--kubeconfig',
        proxyConfig,
        '--hostname-override',
        realNodeName,
        '--proxy-mode',
        'iptables',
        '--cluster-cidr',
        node.subnet,
        '--metrics-bind-address',
        `127.0.0.1:${await freePort()}`,
        '--healthz-bind-address',
        `127.0.0.1:${await freePort()}`,
        // Raising the conntrack table size needs CAP_SYS_RESOURCE, which a container or VM may lack.
        '--conntrack-max-per-core',
        '0',
      ],
      o.logFile('kube-proxy'),
    ),
  );
  await waitUntil(kubelet, `registering node ${realNodeName} Ready`, async () => o.nodeReady(), 90_000);
  await startClusterServices(o, node, dnsBin);
  return node;
}

/**
 * What pods in the cluster expect besides their node: the apiserver at the `kubernetes` Service
 * (the apiserver listens on loopback only, so a forwarder on the node's IP stands in, named by the
 * Service's EndpointSlice) and names resolved by cluster DNS (CoreDNS on the node's IP, port 53).
 */
async function startClusterServices(o: StartOptions, node: RealNodeInfo, dnsBin: string): Promise<void> {
  const apiserverPort = new URL(o.server).port;
  o.started(
    startProcess(
      'apiserver-forwarder',
      'socat',
      [`TCP-LISTEN:${node.apiserverPort},bind=${node.nodeIp},fork,reuseaddr`, `TCP:127.0.0.1:${apiserverPort}`],
      o.logFile('apiserver-forwarder'),
    ),
  );
  o.apply({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: 'kubernetes',
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': 'kubernetes', 'endpointslice.kubernetes.io/managed-by': 'local-stack' },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: [node.nodeIp], conditions: { ready: true } }],
    ports: [{ name: 'https', port: node.apiserverPort, protocol: 'TCP' }],
  });
  const corefile = path.join(node.dir, 'Corefile');
  writeFileSync(
    corefile,
    `.:53 {
  bind ${node.nodeIp}
  errors
  cache 30
  kubernetes cluster.local in-addr.arpa ip6.arpa {
    kubeconfig ${o.adminKubeconfig}
    fallthrough in-addr.arpa ip6.arpa
  }
  forward . /etc/resolv.conf
}
`,
  );
  o.started(startProcess('cluster-dns', dnsBin, ['-conf', corefile], o.logFile('cluster-dns')));
}

/** Loads an image (OCI archive) into the node's containerd, where the kubelet finds it without a registry. */
export function loadImage(node: RealNodeInfo, archive: string, names: string[]): void {
  const r = ctr(node, ['images', 'import', archive]);
  if (!r.ok) throw new Error(`loading ${archive} into the real node failed: ${r.output}`);
  for (const alias of names.slice(1)) {
    const t = ctr(node, ['images', 'tag', '--force', names[0]!, fullyQualified(alias)]);
    if (!t.ok) throw new Error(`tagging ${names[0]} as ${alias} in the real node failed: ${t.output}`);
  }
}

/** How the kubelet asks for a name without a registry host: Docker Hub's (`my-registry/x:1` is `docker.io/my-registry/x:1`). */
export function fullyQualified(ref: string): string {
  const first = ref.split('/')[0]!;
  const hasHost = ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasHost) return ref;
  return ref.includes('/') ? `docker.io/${ref}` : `docker.io/library/${ref}`;
}

/**
 * Stops the node's pods through the runtime (CNI DEL, mounts, network namespaces), then removes what
 * the runtime and the kubelet leave: mounts under the node's directory, cgroups, iptables rules of
 * its network and of kube-proxy, and the bridge. Safe to run on a node that is not there.
 */
export async function cleanUpRealNode(node: RealNodeInfo, processes: ManagedProcess[] = []): Promise<void> {
  const byName = (n: string) => processes.filter((p) => p.name === n);
  for (const n of ['cluster-dns', 'apiserver-forwarder', 'kube-proxy', 'kubelet']) {
    for (const p of byName(n)) await stopProcess(p);
  }
  if (existsSync(node.containerdSocket)) {
    spawnSync(path.join(node.binDir, 'node-reset'), [node.containerdSocket], { stdio: 'ignore', timeout: 120_000 });
  }
  for (const p of byName('containerd')) await stopProcess(p);
  killLeftoverShims(node);
  unmountUnder(node.dir);
  removeCgroups();
  removeIptablesRules(node);
  spawnSync('ip', ['link', 'delete', node.bridge], { stdio: 'ignore' });
  rmSync(node.dir, { recursive: true, force: true });
}

function createBridge(node: RealNodeInfo): void {
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  // An address of its own: a bridge without one takes its lowest port's, so it changed whenever a
  // Pod's veth came or went, and the other Pods' ARP entries for the node's IP went stale. Their
  // packets to it (DNS, the object store, a test's proxy) were then lost for seconds: seen as 10 s
  // connect timeouts and DNS that did not answer, right after another Pod was deleted.
  const mac = createHash('sha256').update(node.bridge).digest().subarray(0, 5);
  ip(
    'link',
    'add',
    node.bridge,
    'address',
    `02:${[...mac].map((b) => b.toString(16).padStart(2, '0')).join(':')}`,
    'type',
    'bridge',
  );
  ip('addr', 'add', `${node.nodeIp}/24`, 'dev', node.bridge);
  ip('link', 'set', node.bridge, 'up');
}

function containerdConfig(node: RealNodeInfo, pauseImage: string): string {
  const d = node.dir;
  return `version = 3
root = "${d}/containerd/root"
state = "${d}/containerd/state"
[grpc]
  address = "${node.containerdSocket}"
[ttrpc]
  address = "${node.containerdSocket}.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "${pauseImage}"
[plugins.'io.containerd.cri.v1.runtime']
  # Without CAP_SYS_RESOURCE (a VM's or container's root) no process may lower its OOM score: runc
  # would fail every pod. This keeps pods' scores at or above containerd's own.
  restrict_oom_score_adj = true
  # Network namespaces under the node's directory, so that cleaning up after a crash finds them.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${d}/cni"
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = "/usr/sbin/runc"
    Root = "${d}/runc"
`;
}

function cniConfig(node: RealNodeInfo) {
  return {
    cniVersion: '1.0.0',
    name: node.network,
    plugins: [
      {
        type: 'bridge',
        bridge: node.bridge,
        isGateway: true,
        ipMasq: true,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          dataDir: path.join(node.dir, 'ipam'),
          ranges: [[{ subnet: node.subnet, gateway: node.nodeIp }]],
          routes: [{ dst: '0.0.0.0/0' }],
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

function kubeletConfig(node: RealNodeInfo, pki: Pki) {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // This machine mounts cgroup v1 controllers; the kubelet refuses v1 unless told (KEP-5573).
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    containerRuntimeEndpoint: `unix://${node.containerdSocket}`,
    address: node.nodeIp,
    port: node.kubeletPort,
    readOnlyPort: 0,
    healthzPort: 0,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: { clientCAFile: pki.caCert } },
    authorization: { mode: 'AlwaysAllow' },
    clusterDomain: 'cluster.local',
    clusterDNS: [node.nodeIp],
    failSwapOn: false,
    // A developer's disk is often fuller than the defaults allow; eviction is not what is tested here.
    evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    registerWithTaints: [realNodeTaint],
  };
}

function ctr(node: RealNodeInfo, args: string[]): { ok: boolean; output: string } {
  const r = spawnSync(
    path.join(node.binDir, 'ctr'),
    ['--address', node.containerdSocket, '--namespace', 'k8s.io', ...args],
    {
      encoding: 'utf8',
      timeout: 300_000,
    },
  );
  return { ok: r.status === 0, output: `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() };
}

/** Shims outlive containerd; after node-reset none should be left, but a crashed node may leave some. */
function killLeftoverShims(node: RealNodeInfo): void {
  for (const pid of readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmdline.includes('containerd-shim-runc-v2') && cmdline.includes(node.containerdSocket)) {
        process.kill(Number(pid), 'SIGKILL');
      }
    } catch {
      // gone already
    }
  }
}

/**
 * Makes `dir` a mount point of its own whose mounts propagate both ways, as the kubelet's root is on
 * a node that runs CSI plugins: the model cache's plugin mounts into it from its container
 * (mountPropagation Bidirectional), which the runtime allows only on a shared mount. This machine's
 * root filesystem is private. Undone by unmountUnder with the rest.
 */
function sharedMount(dir: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync('mount', ['--bind', dir, dir], { stdio: ['ignore', 'ignore', 'pipe'] });
  execFileSync('mount', ['--make-rshared', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
}

function unmountUnder(dir: string): void {
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((m): m is string => !!m && (m === dir || m.startsWith(`${dir}/`)))
    // Deepest first.
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
}

/** The kubelet's QoS cgroups (`kubepods`) in every v1 hierarchy, deepest first. */
function removeCgroups(): void {
  const root = '/sys/fs/cgroup';
  if (!existsSync(root)) return;
  for (const controller of readdirSync(root)) {
    const top = path.join(root, controller, 'kubepods');
    if (existsSync(top)) removeTree(top);
  }
}

function removeTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) removeTree(path.join(dir, entry.name));
  }
  try {
    rmdirSync(dir);
  } catch {
    // a cgroup with a process still in it stays; the next clean-up tries again
  }
}

/** Rules of the node's CNI network (they carry its name) and the chains kube-proxy and the kubelet made. */
function removeIptablesRules(node: RealNodeInfo): void {
  for (const table of ['nat', 'filter', 'mangle']) {
    const rules = spawnSync('iptables', ['-t', table, '-S'], { encoding: 'utf8' }).stdout ?? '';
    const ours = (line: string) => line.includes(`"name: \\"${node.network}\\"`) || /\bKUBE-/.test(line);
    for (const line of rules.split('\n')) {
      if (line.startsWith('-A ') && ours(line)) {
        spawnSync('iptables', ['-t', table, ...splitRule(line.replace(/^-A /, '-D '))], { stdio: 'ignore' });
      }
    }
    const cniChains = new Set(
      rules
        .split('\n')
        .filter((l) => l.includes(`"name: \\"${node.network}\\"`))
        .flatMap((l) => l.match(/CNI-[0-9a-f]+/g) ?? []),
    );
    const chains = rules
      .split('\n')
      .filter((l) => l.startsWith('-N '))
      .map((l) => l.slice(3))
      .filter((c) => c.startsWith('KUBE-') || cniChains.has(c));
    for (const chain of chains) spawnSync('iptables', ['-t', table, '-F', chain], { stdio: 'ignore' });
    for (const chain of chains) spawnSync('iptables', ['-t', table, '-X', chain], { stdio: 'ignore' });
  }
}

/** iptables -S prints arguments with shell quoting; this splits them back. */
function splitRule(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(line); m; m = re.exec(line)) out.push(m[1] !== undefined ? m[1].replace(/\\"/g, '"') : m[2]!);
  return out;
}
