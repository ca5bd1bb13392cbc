/**
 * How much CPU other processes used while a phase of bench/http.ts ran: the machine's busy CPU time
 * (/proc/stat, all cores) minus this process's own (process.cpuUsage), per second of wall time, in
 * cores. On a shared machine it tells which measurements were taken while something else competed
 * for the cores. Linux only; elsewhere the figures are null.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Busy CPU seconds of the whole machine since boot (all cores), or null without /proc/stat. */
function machineBusySeconds(): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal [guest guest_nice: already counted in user/nice]
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / clockTicks();
  } catch {
    return null;
  }
}

function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

export interface CpuShare {
  wallSeconds: number;
  /** CPU used by this process, in cores (CPU seconds per wall second). */
  ownCores: number;
  /** CPU used by every other process (steal included), in cores; null where /proc/stat is missing. */
  otherCores: number | null;
}

export class CpuMeter {
  private readonly wall0 = performance.now();
  private readonly busy0 = machineBusySeconds();
  private readonly own0 = ownCpuSeconds();

  stop(): CpuShare {
    const wallSeconds = (performance.now() - this.wall0) / 1000;
    const own = ownCpuSeconds() - this.own0;
    const busy1 = machineBusySeconds();
    const otherCores = this.busy0 === null || busy1 === null || wallSeconds <= 0 ? null : Math.max(0, (busy1 - this.busy0 - own) / wallSeconds);
    return { wallSeconds, ownCores: wallSeconds > 0 ? own / wallSeconds : NaN, otherCores };
  }
}
