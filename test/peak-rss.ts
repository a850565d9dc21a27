import { readFileSync } from 'node:fs';

/**
 * Follows a process's peak resident memory (the kernel's high-water mark, VmHWM) in /proc every 50 ms; `stop` ends
 * the watch and gives the peak in MB. Read from outside, so that the memory measured is the process's alone.
 */
export function followPeakRss(pid: number | undefined): { stop(): number } {
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
