// CPU and memory of processes and of the whole machine, from /proc (Linux).
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (USER_HZ; 100 on Linux x86-64). */
const ticksPerSecond = 100;

/** User plus system CPU seconds a process has used so far. */
export function processCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces), counted from field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
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

/** Samples CPU and the peak resident set of named processes over a span of time. */
export class Usage {
  private readonly cpuAtStart: Record<string, number>;
  private readonly machineAtStart = machineCpuSeconds();
  private readonly peak: Record<string, number> = {};
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly pids: Record<string, number>) {
    this.cpuAtStart = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, processCpuSeconds(pid)]));
    this.sample();
    this.timer = setInterval(() => this.sample(), 500);
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      try {
        this.peak[name] = Math.max(this.peak[name] ?? 0, rssMiB(pid));
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
        cpuSeconds[name] = round(processCpuSeconds(pid) - this.cpuAtStart[name]!);
      } catch {
        cpuSeconds[name] = NaN;
      }
    }
    const peakRssMiB = Object.fromEntries(Object.entries(this.peak).map(([n, v]) => [n, Math.round(v)]));
    return { cpuSeconds, machineCpuSeconds: round(machineCpuSeconds() - this.machineAtStart), peakRssMiB };
  }
}

export const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
