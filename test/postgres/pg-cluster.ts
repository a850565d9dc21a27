import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway PostgreSQL cluster from the machine's own binaries, for the tests: `initdb` into a temporary directory,
 * `pg_ctl` on a free loopback port, trust authentication on loopback, no fsync. As root (CI), it runs as the
 * `postgres` user, which PostgreSQL requires. Nothing of the machine's own PostgreSQL is used (not its service, not
 * /var/run/postgresql): the socket lives in the cluster's directory.
 */
export interface Cluster {
  /** A URL of the `postgres` database as the superuser `postgres` (no password: trust on loopback). */
  readonly url: string;
  readonly dataDir: string;
  /** Stops the server at once (`pg_ctl stop -m immediate`, as a crash would): connections fail with ECONNREFUSED. */
  stop(): void;
  /** Starts it again, on the same port, once it accepts connections. */
  start(): void;
  /** Stops it if running and removes its directory. */
  destroy(): void;
}

/** The newest PostgreSQL's bin directory, or undefined. `WEBDATA_TEST_POSTGRES_BIN` overrides where to look. */
export function postgresBin(env: Readonly<Record<string, string | undefined>> = process.env): string | undefined {
  if (env.WEBDATA_TEST_POSTGRES_BIN !== undefined) return existsSync(join(env.WEBDATA_TEST_POSTGRES_BIN, 'initdb')) ? env.WEBDATA_TEST_POSTGRES_BIN : undefined;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

/** A loopback port nothing listens on now (taken, then let go). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * `kept`: a directory of the caller's (created when missing, postgres's when root) that holds the cluster and outlives
 * it: a cluster already there (its `data`) is started again rather than made, and `destroy` stops it without removing
 * anything (a bench's year measured again later: test/bench/year.ts).
 */
export async function startCluster(bin: string, kept?: string): Promise<Cluster> {
  const root = kept ?? mkdtempSync(join(tmpdir(), 'webdata-pg-'));
  if (kept !== undefined) mkdirSync(kept, { recursive: true });
  const dataDir = join(root, 'data');
  const log = join(root, 'log');
  const asRoot = userInfo().uid === 0;
  // PostgreSQL refuses to run as root: the cluster belongs to the postgres user, who must be able to reach it. It runs
  // from its own directory: the tests' may be one postgres cannot enter (a clone under /root), which initdb complains of.
  const command = (name: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, name), ...args]] : [join(bin, name), args];
  const run = (name: string, args: string[]) => {
    const result = spawnSync(...command(name, args), { cwd: root, encoding: 'utf8', timeout: 60_000 });
    if (result.status !== 0) {
      const serverLog = existsSync(log) ? `\nserver log:\n${readFileSync(log, 'utf8').split('\n').slice(-15).join('\n')}` : '';
      // Not started at all (runuser not on PATH, say) leaves no status and no output: the spawn's own error says why.
      throw new Error(`${name} ${args.join(' ')} failed (${result.status ?? result.signal ?? result.error?.message}): ${result.stderr || result.stdout}${serverLog}`);
    }
  };
  let port = 0;
  const start = () => {
    // fsync off is safe here (a stopped server's WAL is in the OS's cache); asynchronous commit is not: an immediate
    // stop (the restart tests) would lose commits already acknowledged, which no real server does.
    const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300`;
    run('pg_ctl', ['-D', dataDir, '-o', options, '-l', log, '-w', '-t', '60', 'start']);
  };
  const stop = () => run('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
  const destroy = () => {
    if (existsSync(join(dataDir, 'postmaster.pid'))) {
      try {
        stop();
      } catch {
        // Not running after all (it exited on its own): nothing to stop.
      }
    }
    if (kept === undefined) rmSync(root, { recursive: true, force: true });
  };
  try {
    if (asRoot) {
      const { uid, gid } = postgresUser();
      chownSync(root, uid, gid);
      chmodSync(root, 0o700);
    }
    if (!existsSync(join(dataDir, 'PG_VERSION'))) run('initdb', ['-D', dataDir, '--auth=trust', '-U', 'postgres', '--encoding=UTF8', '--locale=C.UTF-8']);
    // Between freePort closing its socket and the server binding the port, another process may take it: rare, and
    // then only that start fails, so a new port is tried.
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      try {
        start();
        break;
      } catch (error) {
        if (attempt >= 3 || !/Address already in use/.test(String(error))) throw error;
      }
    }
  } catch (error) {
    destroy();
    throw error;
  }
  watch(root, command('pg_ctl', ['-D', dataDir, '-m', kept === undefined ? 'immediate' : 'fast', '-w', 'stop']), kept === undefined);
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, dataDir, start, stop, destroy };
}

/**
 * Removes the cluster if the process that started it dies without doing so: vitest interrupted (Ctrl-C exits without
 * running the global teardown), a worker killed. A server left behind would run until the machine restarts. The
 * watchdog is a shell in a session of its own (a terminal's Ctrl-C does not reach it) that looks once a second whether
 * its owner is alive and the directory still there; it exits on its own once destroy() has removed the directory.
 */
function watch(root: string, [file, args]: [string, string[]], remove: boolean): void {
  // A kept cluster's directory stays: the watchdog watches its pid file instead, gone once destroy() stopped it.
  const there = remove ? '-d "$root"' : '-f "$root/data/postmaster.pid"';
  const script = `owner=$1; root=$2; shift 2; while kill -0 "$owner" 2>/dev/null && [ ${there} ]; do sleep 1; done; ` +
    `[ ${there} ] || exit 0; "$@" >/dev/null 2>&1; ${remove ? 'rm -rf "$root"' : ''}`;
  spawn('/bin/sh', ['-c', script, 'webdata-pg-watchdog', String(process.pid), root, file, ...args], { cwd: root, detached: true, stdio: 'ignore' }).unref();
}

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const [uid, gid] = [id('-u'), id('-g')];
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error("PostgreSQL does not run as root, and there is no 'postgres' user to run it as (Debian's postgresql package creates one)");
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}
