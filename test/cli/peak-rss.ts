import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The kernel's clock ticks a second (`getconf CLK_TCK`), in which /proc/<pid>/stat counts CPU time: 100 on Linux. */
const CLOCK_TICKS = 100;

/**
 * Follows a process's peak resident memory (the kernel's high-water mark, VmHWM) and the CPU time of all its threads
 * (user and system, /proc/<pid>/stat) every 50 ms; `stop` ends the watch and gives the peak in MB and the CPU seconds
 * at the last look (at most 50 ms before the exit). Read from outside, so that what is measured is the process's alone.
 */
function followProcess(pid: number | undefined): { stop(): { peakRssMb: number; cpuSeconds: number } } {
  let peakKb = 0;
  let ticks = 0;
  const timer = setInterval(() => {
    try {
      const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) peakKb = Math.max(peakKb, Number(match[1]));
      // The fields after the command's name, which ends at the last ')': utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks = Math.max(ticks, Number(fields[11]) + Number(fields[12]));
    } catch {
      // Gone between two looks: the last reading stands (VmHWM and CPU time only ever grow).
    }
  }, 50);
  return {
    stop() {
      clearInterval(timer);
      return { peakRssMb: Math.round(peakKb / 1024), cpuSeconds: Math.round((ticks / CLOCK_TICKS) * 10) / 10 };
    },
  };
}

export interface Measured {
  code: number | null;
  stdout: string;
  stderr: string;
  peakRssMb: number;
  /** The CPU time of all its threads, user and system (see followProcess). */
  cpuSeconds: number;
  seconds: number;
}

/**
 * Runs node with `args` — no flag and no environment of ours (MALLOC_ARENA_MAX and NODE_OPTIONS as the caller's
 * shell has them, if at all) — following its peak resident memory and CPU time until it exits.
 */
export function measuredNode(args: string[], options: { cwd: string; env: Record<string, string> }): Promise<Measured> {
  const started = performance.now();
  const { MALLOC_ARENA_MAX: _a, NODE_OPTIONS: _o, ...inherited } = process.env;
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: { ...inherited, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const followed = followProcess(child.pid);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      resolve({ code, stdout, stderr, ...followed.stop(), seconds: Math.round((performance.now() - started) / 100) / 10 });
    }),
  );
}
