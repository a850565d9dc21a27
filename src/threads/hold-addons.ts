/**
 * Loads the SQLite addon on the thread that starts a run's thread, once per process, and keeps it loaded. Why: Node
 * unloads an addon when the last thread that loaded it exits, and only a thread's other than the main one — never the main thread's. A run
 * thread (and its commit thread) were the only ones to load better-sqlite3 in the command line and in most calling
 * programs, so each exit unmapped it while V8 could still hold callbacks into it (the crash class of
 * WiseLibs/better-sqlite3#1476 and nodejs/node#63575). Held here, every later load shares one mapping that stays.
 * Costs ~6 ms and ~6 MB of resident memory once (docs/benchmarks.md#figures-the-code-cites).
 */
let held: Promise<void> | undefined;

export function holdSqliteAddon(): Promise<void> {
  held ??= import('better-sqlite3').then(({ default: Database }) => {
    // The addon itself is loaded on the first database, not on import.
    new Database(':memory:').close();
  });
  return held;
}
