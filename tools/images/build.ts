import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import path from 'node:path';
import { cacheRoot } from '../local-stack/components.js';
import { ensureDebianPackages } from '../local-stack/debian-packages.js';
import { repoRoot, type BaseImage, type Image } from './catalog.js';

/**
 * Images are built with buildah (Debian's package): it builds a Dockerfile without a daemon, as
 * root or not, so the same Dockerfile users build with docker builds here. Its storage lives in the
 * cache, apart from any other buildah or podman on the machine. Each image is kept as an OCI archive
 * named by the hash of its recipe, which the real node imports; an unchanged recipe is not rebuilt.
 */
const imagesDir = path.join(cacheRoot, 'images');
const storage = [
  '--root',
  path.join(imagesDir, 'storage'),
  '--runroot',
  path.join(imagesDir, 'run'),
  '--storage-driver',
  'overlay',
];

type Log = (line: string) => void;

/** Builds the image unless its archive exists; returns the archive. */
export async function ensureImageArchive(image: Image, log: Log = console.error): Promise<string> {
  const archive = path.join(imagesDir, `${slug(image.ref)}-${await recipeHash(image)}.tar`);
  if (existsSync(archive)) return archive;
  ensureDebianPackages(['buildah', 'mmdebstrap'], log);
  mkdirSync(imagesDir, { recursive: true });
  const started = Date.now();
  log(`building image ${image.ref}`);
  if (image.kind === 'binary') {
    const c = (await buildah(['from', 'scratch'], log)).trim();
    const installAs = image.installAs ?? '/entrypoint';
    await buildah(['copy', '--chmod', '0755', c, await image.binary(), installAs], log);
    const entrypoint = image.entrypoint === false ? [] : ['--entrypoint', JSON.stringify([installAs])];
    const env = (image.env ?? []).flatMap((e) => ['--env', e]);
    await buildah(['config', ...entrypoint, '--user', image.user, ...env, c], log);
    await buildah(['commit', '--quiet', '--rm', c, image.ref], log);
  } else {
    const bases = new Map<string, string>();
    for (const base of image.bases) bases.set(base.ref, await ensureBase(base, log));
    await buildah(
      [
        'build',
        '--isolation',
        'chroot',
        // RUN steps reach the package registries through the host's network.
        '--network',
        'host',
        '--pull=never',
        '--layers',
        ...hostTrust(),
        // npm in the build stages trusts the machine's CA bundle too (see deploy/Dockerfile).
        ...(existsSync(caBundle) ? ['--build-arg', `NODE_EXTRA_CA_CERTS=${caBundle}`] : []),
        ...Object.entries(image.buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${bases.get(v) ?? v}`]),
        '-f',
        path.join(repoRoot, image.dockerfile),
        '-t',
        image.ref,
        path.join(repoRoot, image.context ?? '.'),
      ],
      log,
    );
  }
  const partial = `${archive}.${process.pid}.partial`;
  rmSync(partial, { force: true });

  await buildah(['push', '--quiet', image.ref, `oci-archive:${partial}:${image.ref}`], log);
  renameSync(partial, archive);
  log(`built ${image.ref} in ${Math.round((Date.now() - started) / 1000)}s (${mib(archive)} MiB)`);
  return archive;
}

/**
 * RUN steps trust what this machine trusts: its CA bundle (a proxy in front of the registries may
 * sign with its own CA) and pip's global settings, mounted for the build only, never committed.
 */
const caBundle = '/etc/ssl/certs/ca-certificates.crt';

function hostTrust(): string[] {
  const mounts = [caBundle, '/etc/pip.conf'].filter((f) => existsSync(f));
  return mounts.flatMap((f) => ['--volume', `${f}:${f}:ro`]);
}

/** The names an image is known by in the node (the archive holds the first; the rest are tags of it). */
export function imageNames(image: Image): string[] {
  return [image.ref, ...(image.aliases ?? [])];
}

/** Makes the base unless it exists; returns its name, tagged with its recipe's hash so a changed recipe makes a new one. */
async function ensureBase(base: BaseImage, log: Log): Promise<string> {
  const ref = `${base.ref}-${createHash('sha256').update(JSON.stringify(base)).digest('hex').slice(0, 8)}`;
  if (spawnSync('buildah', [...storage, 'inspect', '--type', 'image', ref], { stdio: 'ignore' }).status === 0)
    return ref;
  log(`making base image ${base.ref} from Debian packages (${base.packages.join(', ')})`);
  const rootfs = path.join(imagesDir, `${slug(base.ref)}.rootfs.tar`);
  await run(
    'mmdebstrap',
    [
      `--variant=${base.variant}`,
      `--include=${base.packages.join(',')}`,
      '--aptopt=Acquire::Retries "3"',
      // No documentation, no apt lists: smaller images.
      '--dpkgopt=path-exclude=/usr/share/doc/*',
      '--dpkgopt=path-exclude=/usr/share/man/*',
      '--dpkgopt=path-exclude=/usr/share/locale/*',
      '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
      'bookworm',
      rootfs,
      'http://deb.debian.org/debian',
    ],
    log,
  );
  const c = (await buildah(['from', 'scratch'], log)).trim();
  await buildah(['add', c, rootfs, '/'], log);
  for (const [from, to] of (await base.files?.()) ?? []) await buildah(['copy', c, from, to], log);
  for (const command of base.commands ?? [])
    await buildah(['run', '--isolation', 'chroot', c, '--', 'sh', '-c', command], log);
  const cfg = base.config ?? {};
  const configArgs = [
    ...(cfg.user ? ['--user', cfg.user] : []),
    ...(cfg.entrypoint ? ['--entrypoint', JSON.stringify(cfg.entrypoint)] : []),
    ...(cfg.workdir ? ['--workingdir', cfg.workdir] : []),
    ...(cfg.env ?? []).flatMap((e) => ['--env', e]),
  ];
  if (configArgs.length > 0) await buildah(['config', ...configArgs, c], log);
  await buildah(['commit', '--quiet', '--rm', c, ref], log);
  rmSync(rootfs, { force: true });
  return ref;
}

/** The hash of everything an image is made from: its recipe, the files it copies, its bases' recipes. */
async function recipeHash(image: Image): Promise<string> {
  const h = createHash('sha256').update(JSON.stringify(image, (_k, v) => (typeof v === 'function' ? undefined : v)));
  if (image.kind === 'binary') h.update(readFileSync(await image.binary()));
  else for (const input of [image.dockerfile, ...image.inputs]) hashPath(h, path.join(repoRoot, input));
  return h.digest('hex').slice(0, 12);
}

function hashPath(h: ReturnType<typeof createHash>, p: string): void {
  if (statSync(p).isDirectory()) {
    for (const entry of readdirSync(p).sort()) hashPath(h, path.join(p, entry));
  } else {
    // Relative: two checkouts of the same recipe share one archive.
    h.update(path.relative(repoRoot, p)).update(readFileSync(p));
  }
}

function buildah(args: string[], log: Log): Promise<string> {
  return run('buildah', [...storage, ...args], log);
}

function slug(ref: string): string {
  return ref.replace(/[^a-zA-Z0-9.-]+/g, '_');
}

function mib(file: string): number {
  return Math.round(statSync(file).size / 2 ** 20);
}

/** Runs a command; its output is returned, and on failure its tail is in the error. */
function run(cmd: string, args: string[], log: Log): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const tail: string[] = [];
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      for (const line of d.toString().split('\n').filter(Boolean)) {
        tail.push(line);
        if (tail.length > 30) tail.shift();
      }
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) return resolve(out);
      log(tail.join('\n'));
      reject(new Error(`${cmd} ${args.slice(0, 6).join(' ')} ... exited with ${code}`));
    });
  });
}

/** Copies one file out of an image (built first when missing) to `dest`: the model server's trained model, for the object store. */
export async function extractImageFile(
  image: Image,
  file: string,
  dest: string,
  log: Log = console.error,
): Promise<void> {
  const archive = await ensureImageArchive(image, log);
  const c = (await buildah(['from', '--quiet', `oci-archive:${archive}`], log)).trim();
  try {
    const root = (await buildah(['mount', c], log)).trim();
    mkdirSync(path.dirname(dest), { recursive: true });
    copyFileSync(realPathIn(root, file), dest);
  } finally {
    await buildah(['rm', c], log).catch(() => undefined);
  }
}

/** A path inside a mounted image, its symbolic links followed within the image. */
function realPathIn(root: string, file: string): string {
  let p = path.join(root, file);
  for (let i = 0; i < 10 && lstatSync(p).isSymbolicLink(); i++) {
    const target = readlinkSync(p);
    p = path.isAbsolute(target) ? path.join(root, target) : path.join(path.dirname(p), target);
  }
  return p;
}
