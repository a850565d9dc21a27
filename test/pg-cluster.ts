import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway PostgreSQL cluster from the machine's own binaries, for the tests: `initdb` into a temporary directory,
 * `pg_ctl` on a free loopback port, trust authentication on loopback, no fsync. As root (CI), it runs as the
 * `postgres` user, which PostgreSQL requires.
 */
export interface Cluster {
  /** A URL of the `postgres` database as the superuser `postgres` (no password: trust on loopback). */
  readonly url: string;
  readonly dataDir: string;
  stop(): void;
  start(): void;
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

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startCluster(bin: string): Promise<Cluster> {
  const root = mkdtempSync(join(tmpdir(), 'webdata-pg-'));
  const dataDir = join(root, 'data');
  const asRoot = userInfo().uid === 0;
  // PostgreSQL refuses to run as root: the cluster belongs to the postgres user, who must be able to reach it.
  const run = (command: string, args: string[]) => {
    const [file, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, command), ...args]] : [join(bin, command), args];
    const result = spawnSync(file, argv, { encoding: 'utf8', timeout: 60_000 });
    if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal}): ${result.stderr || result.stdout}`);
  };
  if (asRoot) {
    const { uid, gid } = postgresUser();
    chownSync(root, uid, gid);
    chmodSync(root, 0o700);
  }
  run('initdb', ['-D', dataDir, '--auth=trust', '-U', 'postgres', '--encoding=UTF8', '--locale=C.UTF-8']);
  const port = await freePort();
  // fsync off is safe here (a stopped server's WAL is in the OS's cache); asynchronous commit is not: an immediate stop
  // (the restart tests) would lose commits already acknowledged, which no real server does.
  const options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300`;
  const log = join(root, 'log');
  const start = () => run('pg_ctl', ['-D', dataDir, '-o', options, '-l', log, '-w', '-t', '60', 'start']);
  const stop = () => run('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    dataDir,
    start,
    stop,
    destroy() {
      try {
        stop();
      } catch {
        // Already stopped.
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

function postgresUser(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}
