import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * Follows a process's peak resident memory (the kernel's high-water mark, VmHWM) in /proc every 50 ms; `stop` ends
 * the watch and gives the peak in MB. Read from outside, so that the memory measured is the process's alone.
 */
function followPeakRss(pid: number | undefined): { stop(): number } {
  let peakKb = 0;
  const timer = setInterval(() => {
    try {
      const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) peakKb = Math.max(peakKb, Number(match[1]));
    } catch {
      // Gone between two looks: the last reading stands (VmHWM only ever grows).
    }
  }, 50);
  return {
    stop() {
      clearInterval(timer);
      return Math.round(peakKb / 1024);
    },
  };
}

export interface Measured {
  code: number | null;
  stdout: string;
  stderr: string;
  peakRssMb: number;
  seconds: number;
}

/**
 * Runs node with `args` — no flag and no environment of ours (MALLOC_ARENA_MAX and NODE_OPTIONS as the caller's
 * shell has them, if at all) — following its peak resident memory until it exits.
 */
export function measuredNode(args: string[], options: { cwd: string; env: Record<string, string> }): Promise<Measured> {
  const started = performance.now();
  const { MALLOC_ARENA_MAX: _a, NODE_OPTIONS: _o, ...inherited } = process.env;
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: { ...inherited, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const peak = followPeakRss(child.pid);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      resolve({ code, stdout, stderr, peakRssMb: peak.stop(), seconds: Math.round((performance.now() - started) / 100) / 10 });
    }),
  );
}
