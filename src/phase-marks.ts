/*
 * Phase marks: where a process's time goes before its first request and after its last (docs/benchmarks.md#joining-a-run).
 * Off unless WEBDATA_PHASES=1, and then one stderr line per mark — `webdata-etl phase <name> <ms>`, the time since the
 * process started (`process.uptime()`, the process's on a run's own thread too, where performance.now() would count
 * from the thread's start) — so that a bench or a person can read a worker's first second without
 * a profiler, and an ordinary run pays one boolean test per mark.
 */
const on = process.env.WEBDATA_PHASES === '1';

/** Marks that the process reached `name` now (when WEBDATA_PHASES=1). */
export function phase(name: string): void {
  if (on) process.stderr.write(`webdata-etl phase ${name} ${(process.uptime() * 1000).toFixed(1)}\n`);
}

/** Marks `name` the first time only (a first answer, a first page). */
export function firstPhase(name: string): void {
  if (on && !seen.has(name)) {
    seen.add(name);
    phase(name);
  }
}

const seen = new Set<string>();
