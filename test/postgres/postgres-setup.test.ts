import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { until } from '../helpers.ts';
import { postgresBin, startCluster } from './pg-cluster.ts';
import { describePostgres, describePrivateCluster, privateCluster, sql, testDatabase } from './pg.ts';

/**
 * The test infrastructure itself (test/postgres/pg-setup.ts, test/postgres/pg.ts, test/postgres/pg-cluster.ts): every PostgreSQL suite trusts
 * that a database is fresh and its own, and the restart tests that a private cluster stops and starts on request.
 */
describePostgres('the PostgreSQL the tests run on', () => {
  it('a fresh database takes CREATE TABLE, INSERT and SELECT, and is empty to begin with', async () => {
    const db = await testDatabase();
    try {
      expect(await sql(db.url, `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`)).toEqual([{ n: 0 }]);
      await sql(db.url, 'CREATE TABLE t (id integer PRIMARY KEY, name text NOT NULL)');
      await sql(db.url, 'INSERT INTO t VALUES ($1, $2), ($3, $4)', [1, 'one', 2, 'two']);
      expect(await sql(db.url, 'SELECT id, name FROM t ORDER BY id')).toEqual([{ id: 1, name: 'one' }, { id: 2, name: 'two' }]);
      expect(await sql(db.url, 'SELECT current_database() AS name')).toEqual([{ name: db.name }]);
    } finally {
      await db.drop();
    }
  });

  it('two databases are two: a table in one is not in the other; drop removes a database still connected to', async () => {
    const [a, b] = await Promise.all([testDatabase(), testDatabase()]);
    try {
      expect(a.name).not.toBe(b.name);
      expect(a.url).not.toBe(b.url);
      await sql(a.url, 'CREATE TABLE only_in_a (x int)');
      expect(await sql(b.url, `SELECT to_regclass('only_in_a') AS t`)).toEqual([{ t: null }]);
      await b.drop();
      expect(await sql(a.url, 'SELECT count(*)::int AS n FROM pg_database WHERE datname = $1', [b.name])).toEqual([{ n: 0 }]);
    } finally {
      await a.drop();
      await b.drop();
    }
  });
});

describePrivateCluster('a private cluster', () => {
  it(
    'listens on loopback only, keeps its socket in its own directory, and stops, starts and goes away on request',
    async () => {
      const cluster = await privateCluster();
      if (!cluster) return expect.unreachable('postgresBin() found binaries');
      let destroyed = false;
      try {
        const settings = async () =>
          Object.fromEntries(
            (await sql(cluster.url, `SELECT name, setting FROM pg_settings WHERE name IN ('listen_addresses', 'unix_socket_directories', 'fsync')`)).map(
              (r) => [r.name, r.setting],
            ),
          );
        // Nothing in /var/run/postgresql, nothing on a public interface: the cluster is the test's alone.
        expect(await settings()).toEqual({ listen_addresses: '127.0.0.1', unix_socket_directories: dirname(cluster.dataDir), fsync: 'off' });
        expect(readdirSync(dirname(cluster.dataDir))).toContain(`.s.PGSQL.${new URL(cluster.url).port}`);
        // The newest PostgreSQL on the machine (or the one WEBDATA_TEST_POSTGRES_BIN names).
        const major = Number((await sql(cluster.url, 'SHOW server_version_num'))[0]?.server_version_num) / 10_000;
        expect(postgresBin()).toMatch(new RegExp(`/${Math.floor(major)}/bin$`));

        await sql(cluster.url, 'CREATE TABLE kept (x int)');
        await sql(cluster.url, 'INSERT INTO kept VALUES (7)');
        cluster.stop();
        await expect(sql(cluster.url, 'SELECT 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
        cluster.start();
        // Committed before an immediate stop, there after the start (synchronous_commit stays on for this).
        expect(await sql(cluster.url, 'SELECT x FROM kept')).toEqual([{ x: 7 }]);

        cluster.destroy();
        destroyed = true;
        expect(existsSync(cluster.dataDir)).toBe(false);
        expect(existsSync(dirname(cluster.dataDir))).toBe(false);
        await expect(sql(cluster.url, 'SELECT 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      } finally {
        if (!destroyed) cluster.destroy();
      }
    },
  );
});

describePrivateCluster('a cluster whose test process dies', () => {
  it('is stopped and removed without it: a killed process leaves no server running and no directory behind', async () => {
    // A process of its own that starts a cluster and is then killed outright, as an interrupted vitest or a worker
    // past its time is: no teardown runs.
    const script = `const { startCluster, postgresBin } = await import(${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'pg-cluster.ts')).href)});
      const cluster = await startCluster(postgresBin());
      console.log(JSON.stringify({ url: cluster.url, dataDir: cluster.dataDir }));
      setInterval(() => {}, 1 << 30);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    await until(() => out.includes('\n') || child.exitCode !== null);
    const { url, dataDir } = JSON.parse(out) as { url: string; dataDir: string };
    try {
      expect(await sql(url, 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
      child.kill('SIGKILL');
      await exited;
      await until(() => !existsSync(dirname(dataDir)));
      await expect(sql(url, 'SELECT 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      child.kill('SIGKILL');
    }
  });
});

/** Whether this process can run a cluster: as root only through the postgres user. */
const canRunCluster = userInfo().uid !== 0 || spawnSync('id', ['-u', 'postgres']).status === 0;

describe.skipIf(!canRunCluster)('a cluster that does not start', () => {
  it('tries another port when the one it was given was taken meanwhile, then fails with the server log and leaves nothing behind', async () => {
    // Stand-ins for the binaries (no PostgreSQL needed): initdb makes the data directory; pg_ctl fails as a server
    // does whose port another process took between the free-port check and its start.
    const bin = mkdtempSync(join(tmpdir(), 'webdata-fake-pg-'));
    try {
      chmodSync(bin, 0o755);
      const tool = (name: string, body: string) => {
        writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
        chmodSync(join(bin, name), 0o755);
      };
      tool('initdb', 'mkdir -p "$2"');
      tool('pg_ctl', 'echo "LOG:  could not bind IPv4 address \\"127.0.0.1\\": Address already in use" >> "$6"; echo "pg_ctl: could not start server" >&2; exit 1');
      const error = await startCluster(bin).then(
        () => expect.unreachable('the stand-in pg_ctl never starts'),
        (e: unknown) => e as Error,
      );
      expect(error.message).toMatch(/^pg_ctl .* start failed \(1\): pg_ctl: could not start server/);
      // Three ports tried, and each attempt's line of the server log is in the message.
      expect(error.message.match(/Address already in use/g)).toHaveLength(3);
      const dataDir = /-D (\S+)/.exec(error.message)?.[1] ?? '';
      expect(dataDir).toMatch(/webdata-pg-[^/]+\/data$/);
      expect(existsSync(dirname(dataDir))).toBe(false);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
