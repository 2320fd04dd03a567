import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/** A background server of the stack, recorded in the state file so another command can find and stop it. */
export interface ManagedProcess {
  name: string;
  pid: number;
  /** The executable, to make sure a recorded pid still belongs to us before signalling it. */
  command: string;
  logFile: string;
}

/** How the servers this process started ended, by pid: their exit is known without reading /proc. */
const exits = new Map<number, string>();
const children = new Set<number>();

/** Starts a server detached from this process (its own process group), output appended to its log file. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  logFile: string,
  env?: NodeJS.ProcessEnv,
  /** Another account to run it as (PostgreSQL refuses root). */
  account?: { uid: number; gid: number },
): ManagedProcess {
  const fd = openSync(logFile, 'a');
  try {
    const child = spawn(command, args, {
      detached: true,
      stdio: ['ignore', fd, fd],
      env: { ...process.env, ...env },
      ...account,
    });
    if (child.pid === undefined) throw new Error(`could not start ${name} (${command})`);
    const pid = child.pid;
    children.add(pid);
    child.once('exit', (code, signal) => exits.set(pid, signal ? `killed by ${signal}` : `exit code ${code}`));
    child.unref();
    return { name, pid: child.pid, command, logFile };
  } finally {
    closeSync(fd);
  }
}

export function isRunning(p: ManagedProcess): boolean {
  // Our own child: its exit event says it (a server recorded by an earlier command is checked in /proc).
  if (children.has(p.pid)) return !exits.has(p.pid);
  try {
    const cmdline = readFileSync(`/proc/${p.pid}/cmdline`, 'utf8');
    return cmdline.startsWith(p.command) && !readFileSync(`/proc/${p.pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

/** SIGTERM to the process group, then SIGKILL if it has not gone within the grace period. */
export async function stopProcess(p: ManagedProcess, graceMs = 10_000): Promise<void> {
  if (!isRunning(p)) return;
  signalGroup(p.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isRunning(p)) return;
    await sleep(100);
  }
  signalGroup(p.pid, 'SIGKILL');
  while (isRunning(p)) await sleep(50);
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

export function logTail(file: string, lines = 30): string {
  if (!existsSync(file)) return '(no log)';
  return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** Polls `check` until it returns true; fails early if the process died, with the tail of its log. */
export async function waitUntil(
  p: ManagedProcess,
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isRunning(p)) {
      throw new ComponentFailure(p, `${p.name} exited (${exits.get(p.pid) ?? 'no longer running'}) before ${what}`);
    }
    if (await check().catch(() => false)) return;
    await sleep(200);
  }
  throw new ComponentFailure(p, `${p.name} not ${what} after ${timeoutMs / 1000}s`);
}

export class ComponentFailure extends Error {
  override name = 'ComponentFailure';
  constructor(
    readonly process: ManagedProcess,
    message: string,
  ) {
    super(`${message}; last lines of ${process.logFile}:\n${logTail(process.logFile)}`);
  }
}

/**
 * The ports the kernel gives outgoing connections. A free port chosen in that range (as listening on
 * port 0 chooses) can be taken by some connection's local end before its server binds it: seen twice,
 * "address already in use" from Temporal and from kwok.
 */
function ephemeralPorts(): { low: number; high: number } {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (Number.isInteger(low) && Number.isInteger(high)) return { low: low!, high: high! };
  } catch {
    // Not Linux: the IANA range, which macOS uses.
  }
  return { low: 49152, high: 65535 };
}

/** Ports this process handed out; their servers may not have bound them yet. */
const handedOut = new Set<number>();

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A loopback port nothing listens on, outside the ephemeral range so no connection takes it meanwhile. */
export async function freePort(): Promise<number> {
  const { low, high } = ephemeralPorts();
  // Above the stack's fixed ports (the highest is etcd's peer port, 23800).
  const [from, to] = low > 25_000 ? [24_000, low - 1] : [high + 1, 65_535];
  // No room outside it (a kernel that lends every port): any free one, as the kernel picks it.
  if (from > to) return anyFreePort();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = randomInt(from, to + 1);
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port in ${from}-${to}`);
}

export async function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/** Whether a process with this pid exists (one of another user's counts too). */
export function pidAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
