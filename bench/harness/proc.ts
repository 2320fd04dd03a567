// CPU and memory of processes and of the whole machine, from /proc (Linux).
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (USER_HZ; 100 on Linux x86-64). */
const ticksPerSecond = 100;

/** /proc/<pid>/stat's fields after the command name (which may hold spaces), counted from field 3 (state). */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** User plus system CPU seconds a process has used so far. */
export function processCpuSeconds(pid: number): number {
  const fields = statFields(pid);
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/** The live children of a process. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (Number(statFields(Number(entry))[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * A server that works in child processes (PostgreSQL: a backend per connection): its own CPU, its
 * ended children's (reaped, so in its cutime and cstime), and its live children's.
 */
export function processTreeCpuSeconds(pid: number): number {
  const fields = statFields(pid);
  const own = (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / ticksPerSecond;
  let children = 0;
  for (const child of childrenOf(pid)) {
    try {
      children += processCpuSeconds(child);
    } catch {
      // ended between the listing and the read: its time went to the parent's cutime
    }
  }
  return own + children;
}

/** The resident sets of a process and its live children added up (shared memory counted in each). */
function treeRssMiB(pid: number): number {
  let total = rssMiB(pid);
  for (const child of childrenOf(pid)) {
    try {
      total += rssMiB(child);
    } catch {
      // ended meanwhile
    }
  }
  return total;
}

/** CPU seconds the whole machine has been busy (every core, all but idle and iowait). */
export function machineCpuSeconds(): number {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = cpu as number[];
  return (user! + nice! + system! + irq! + softirq! + steal!) / ticksPerSecond;
}

/** Resident set now, in MiB. */
export function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)![1]) / 1024;
}

/**
 * Samples CPU and the peak resident set of named processes over a span of time; those named in
 * `trees` with their child processes.
 */
export class Usage {
  private readonly cpuAtStart: Record<string, number>;
  private readonly machineAtStart = machineCpuSeconds();
  private readonly peak: Record<string, number> = {};
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pids: Record<string, number>,
    private readonly trees: string[] = [],
  ) {
    this.cpuAtStart = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, this.cpu(name, pid)]));
    this.sample();
    this.timer = setInterval(() => this.sample(), 500);
  }

  private cpu(name: string, pid: number): number {
    return this.trees.includes(name) ? processTreeCpuSeconds(pid) : processCpuSeconds(pid);
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      try {
        this.peak[name] = Math.max(this.peak[name] ?? 0, this.trees.includes(name) ? treeRssMiB(pid) : rssMiB(pid));
      } catch {
        // exited; its last sample stands
      }
    }
  }

  /** CPU seconds per process and for the machine since the start, and each process's peak RSS. */
  stop(): { cpuSeconds: Record<string, number>; machineCpuSeconds: number; peakRssMiB: Record<string, number> } {
    clearInterval(this.timer);
    this.sample();
    const cpuSeconds: Record<string, number> = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      try {
        cpuSeconds[name] = round(this.cpu(name, pid) - this.cpuAtStart[name]!);
      } catch {
        cpuSeconds[name] = NaN;
      }
    }
    const peakRssMiB = Object.fromEntries(Object.entries(this.peak).map(([n, v]) => [n, Math.round(v)]));
    return { cpuSeconds, machineCpuSeconds: round(machineCpuSeconds() - this.machineAtStart), peakRssMiB };
  }
}

export const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
