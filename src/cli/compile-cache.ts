import { lstatSync, mkdirSync, statSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';

/**
 * Turns on Node's on-disk compile cache for this process and for the run's threads: the library's modules are parsed,
 * type-stripped and compiled once per version, not at every start. A worker of a distributed run spends most of its
 * first second loading modules (docs/benchmarks.md#joining-a-run), and 2–4 workers started together on 2 cores load
 * them side by side: with the cache, loading the library takes 0.18 s instead of 0.47 s.
 *
 * The directory is the user's own (`${XDG_CACHE_HOME:-~/.cache}/webdata-etl/node-compile-cache`, beside the Node that
 * scripts/with-node.mjs installs), never a shared temporary directory another user could fill. `NODE_COMPILE_CACHE`
 * names another; `NODE_DISABLE_COMPILE_CACHE=1` turns it off (both Node's own variables). Node checks every entry
 * against the source it was made from and ignores a stale or broken one; a directory that cannot be made leaves the
 * cache off, which changes nothing but the start-up time.
 *
 * The cache holds code this process will run: a directory someone else can write to (another user's, one writable by
 * others, or a symlink someone could point elsewhere) would let them run code as this user. Such a directory is not
 * used, and `warn` says so in one line. `NODE_COMPILE_CACHE` is not checked: Node itself reads it at start-up, before
 * any of this runs, so the user who sets it has chosen it.
 */
export function useCompileCache(warn: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): void {
  const directory = compileCacheDirectory(process.env);
  if (!directory) return;
  try {
    if (!process.env.NODE_COMPILE_CACHE) {
      const why = notPrivate(directory);
      if (why) {
        warn(`webdata-etl: compile cache off (start-up is slower): ${why}`);
        return;
      }
    }
    const enabled = enableCompileCache(directory);
    // A thread reads the variable when it starts (not this thread's setting): the run's threads follow it.
    if (enabled.directory) process.env.NODE_COMPILE_CACHE = enabled.directory;
  } catch {
    // No cache: the process starts as it always did.
  }
}

/**
 * Where the command line keeps the cache in an environment `env`, or undefined when it is turned off there. A relative
 * `XDG_CACHE_HOME` is ignored, as the XDG Base Directory rules say (it would put the cache under whatever directory a
 * command happens to be run from).
 */
export function compileCacheDirectory(env: NodeJS.ProcessEnv): string | undefined {
  if (env.NODE_DISABLE_COMPILE_CACHE) return undefined;
  if (env.NODE_COMPILE_CACHE) return env.NODE_COMPILE_CACHE;
  const cacheHome = env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(cacheHome, 'webdata-etl', 'node-compile-cache');
}

/**
 * Why `directory` (`<cache home>/webdata-etl/node-compile-cache`) is not this user's own and private, or undefined when
 * it is. Our two directories are made `0700` when missing; then each must be a real directory (not a symlink), owned by
 * this user and writable by nobody else, and the cache home above them owned by this user or root and not writable by
 * others (else its owner could swap our directories for theirs). Where there are no user ids (Windows) nothing is checked.
 */
export function notPrivate(directory: string): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const ours = [dirname(directory), directory];
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const home = dirname(ours[0] as string);
  // The cache home is followed if it is a link: the user (or whoever set XDG_CACHE_HOME for them) chose it.
  const homeStat = statSync(home);
  if (homeStat.uid !== uid && homeStat.uid !== 0) return `${home} belongs to another user (uid ${homeStat.uid})`;
  if ((homeStat.mode & 0o002) !== 0) return `${home} is writable by other users`;
  for (const path of ours) {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return `${path} is a symbolic link`;
    if (!stat.isDirectory()) return `${path} is not a directory`;
    if (stat.uid !== uid) return `${path} belongs to another user (uid ${stat.uid})`;
    if ((stat.mode & 0o022) !== 0) return `${path} is writable by other users (mode ${(stat.mode & 0o777).toString(8)})`;
  }
  return undefined;
}
