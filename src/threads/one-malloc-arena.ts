/**
 * Makes this process a run's process with one malloc arena: restarts it in place (process.execve: the same pid,
 * arguments, Node flags, terminal and signals) with MALLOC_ARENA_MAX=1 in its environment, unless that is set already.
 *
 * Why: glibc gives each thread that allocates at once an arena of its own and keeps what was freed in it, and a run has
 * three such threads (main, run, commit) besides V8's helpers: at 1,000,000 items and concurrency 32 the arenas held
 * about 63 MB at the peak, and one arena takes the peak down by about 20 MB at the same speed
 * (docs/benchmarks.md#memory). glibc reads the setting only from the environment at process start — which is why the
 * bin's shebang sets it — and `node dist/cli/main.js run …` or a source checkout's `node src/cli/main.ts run …` do not
 * go through the shebang. Only where it means something: Linux with glibc (musl and other systems ignore the variable)
 * and a Node with process.execve. Set MALLOC_ARENA_MAX yourself (any value) to keep your own.
 *
 * Call it first, before anything of the user's has run: the process starts again from the top. It returns only when
 * the process is not restarted.
 */
export function restartWithOneMallocArena(): void {
  if (process.env.MALLOC_ARENA_MAX !== undefined) return;
  if (process.platform !== 'linux' || typeof process.execve !== 'function' || !withGlibc()) return;
  const node = process.execPath;
  try {
    process.execve(node, [node, ...process.execArgv, ...process.argv.slice(1)], { ...process.env, MALLOC_ARENA_MAX: '1' });
  } catch {
    // Not replaced (it returns only on failure): the run goes on as it was started, with glibc's default arenas.
  }
}

/** Whether this Node runs on glibc (its diagnostic report's header names the version; musl's has none). */
function withGlibc(): boolean {
  try {
    const header = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header;
    return typeof header?.glibcVersionRuntime === 'string';
  } catch {
    // No report to be had (a build without it): the run goes on as started, which is always correct.
    return false;
  }
}
