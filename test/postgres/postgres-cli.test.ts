import { expect, it } from 'vitest';
import pg from 'pg';
import { simulator } from '../helpers.ts';
import { cli, config, envFor, startCli } from '../cli-helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { freePort } from './pg-cluster.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

const postgresSink = (url: string) => ({ sinks: [{ type: 'postgres', table: 'results', url }] });

describePostgres('PostgreSQL from the command line', () => {
  it('a JSON config with a postgres sink and state runs into the database', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { ...postgresSink(db.url), state: { url: db.url } });
      const result = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(result.code, result.stderr).toBe(0);
      const summary = JSON.parse(result.stdout) as { items: { written: number }; runId: string };
      expect(await sql(db.url, 'SELECT COUNT(*)::int AS n FROM results')).toEqual([{ n: summary.items.written }]);
      expect(await sql(db.url, 'SELECT run_id, status FROM webdata.runs')).toEqual([{ run_id: summary.runId, status: 'completed' }]);
    } finally {
      await db.drop();
    }
  });

  it('--state (or WEBDATA_STATE_URL) puts the run state in PostgreSQL, the rows staying in SQLite', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const byFlag = await cli(['run', config(dir.dir), '--state', db.url], { cwd: dir.dir, env: envFor(sim.url) });
      expect(byFlag.code, byFlag.stderr).toBe(0);
      const byEnv = await cli(['run', config(dir.dir, { name: 'by-env', sinks: [{ type: 'sqlite', path: 'env/results.sqlite' }] })], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_STATE_URL: db.url } });
      expect(byEnv.code, byEnv.stderr).toBe(0);
      expect(await sql(db.url, 'SELECT pipeline, status FROM webdata.runs ORDER BY created')).toEqual([
        { pipeline: 'cli-test', status: 'completed' },
        { pipeline: 'by-env', status: 'completed' },
      ]);
    } finally {
      await db.drop();
    }
  });

  it('a password in a config file or on --state is refused (exit 2, pointing at PGPASSWORD) before any request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const inFile = await cli(['run', config(dir.dir, postgresSink('postgres://me:hunter2@127.0.0.1/x'))], { cwd: dir.dir, env: envFor(sim.url) });
    expect(inFile.code).toBe(2);
    expect(inFile.stderr).toMatch(/sinks\.0\.url: must not carry a password .*PGPASSWORD/);
    const onFlag = await cli(['run', config(dir.dir), '--state', 'postgres://me:hunter2@127.0.0.1/x'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(onFlag.code).toBe(2);
    expect(onFlag.stderr).toMatch(/--state must not carry a password/);
    for (const result of [inFile, onFlag]) expect(result.stdout + result.stderr).not.toContain('hunter2');
    expect(sim.stats().requests).toBe(0);
  });

  it('a password from the environment (WEBDATA_STATE_URL, DATABASE_URL) is used, and never shown: not in the summary, the output, the database', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      // The test cluster trusts loopback: any password connects, so the run goes through with one in both URLs.
      const withPassword = db.url.replace('postgres@', 'postgres:s3cret-pw@');
      const file = config(dir.dir, { sinks: [{ type: 'postgres', table: 'results' }] });
      const result = await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_STATE_URL: withPassword, DATABASE_URL: withPassword } });
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout + result.stderr).not.toContain('s3cret-pw');
      const runs = await sql(db.url, 'SELECT summary, error FROM webdata.runs');
      expect(JSON.stringify(runs)).not.toContain('s3cret-pw');
      expect(JSON.stringify(runs)).toContain('***');
      const unreachable = await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_STATE_URL: `postgres://postgres:s3cret-pw@127.0.0.1:${await freePort()}/x` } });
      expect(unreachable.code).toBe(75);
      expect(unreachable.stdout + unreachable.stderr).not.toContain('s3cret-pw');
    } finally {
      await db.drop();
    }
  });

  it('an unreachable server at the start: exit 75 before any paid request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const result = await cli(['run', config(dir.dir), '--state', `postgres://postgres@127.0.0.1:${await freePort()}/nowhere`], { cwd: dir.dir, env: envFor(sim.url) });
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/cannot be reached .*ECONNREFUSED.*run the same command again/s);
    expect(sim.stats().requests).toBe(0);
  });

  it('a role without CREATE on the database: exit 2 naming the privilege, before any request; with a schema made for it, it runs', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const role = `limited_${db.name}`;
      await sql(db.url, `CREATE ROLE ${role} LOGIN`);
      const url = new URL(db.url);
      url.username = role;
      const result = await cli(['run', config(dir.dir), '--state', url.toString()], { cwd: dir.dir, env: envFor(sim.url) });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(/permission denied for database .*needs CREATE on the database/s);
      expect(sim.stats().requests).toBe(0);

      // Given a schema an administrator made for it (and nothing on the database), the same role runs.
      await sql(db.url, `CREATE SCHEMA webdata AUTHORIZATION ${role}`);
      const granted = await cli(['run', config(dir.dir), '--state', url.toString()], { cwd: dir.dir, env: envFor(sim.url) });
      expect(granted.code, granted.stderr).toBe(0);
      await sql(db.url, `DROP OWNED BY ${role}; DROP ROLE ${role}`);
    } finally {
      await db.drop();
    }
  });

  it('a distributed run needs its job queue schema too: without CREATE, exit 2 naming the privilege; with both schemas made for it, it runs', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const role = `limited_${db.name}`;
      await sql(db.url, `CREATE ROLE ${role} LOGIN; CREATE SCHEMA webdata AUTHORIZATION ${role}; GRANT CREATE ON SCHEMA public TO ${role}`);
      const url = new URL(db.url);
      url.username = role;
      const file = config(dir.dir, { name: 'limited', ...postgresSink(url.toString()), state: { url: url.toString() } });
      const refused = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(/permission denied for database .*needs CREATE on the database/s);
      expect(sim.stats().requests).toBe(0);

      await sql(db.url, `CREATE SCHEMA webdata_jobs AUTHORIZATION ${role}`);
      const granted = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(granted.code, granted.stderr).toBe(0);
      await sql(db.url, `DROP OWNED BY ${role}; DROP ROLE ${role}`);
    } finally {
      await db.drop();
    }
  });
});

/**
 * A fault of the database while a run's page is held on its way: `fault` breaks the database (the run's table made,
 * other pages perhaps committed), the page is let go, and the run must stop with exit 75 and `message`; `mend` puts it
 * right, and the same command must complete the run as an uninterrupted one would, paying at most the requests in
 * flight twice.
 */
async function faultThenResume(options: { env?: Record<string, string>; fault(url: string): Promise<void>; mend(url: string): Promise<void>; message: RegExp }) {
  await using sim = await simulator({ seed: 3 });
  await using reference = await simulator({ seed: 3 });
  using dir = workdir();
  const db = await testDatabase();
  const baseline = await testDatabase();
  try {
    const plain = await cli(['run', config(dir.dir, postgresSink(baseline.url))], { cwd: dir.dir, env: envFor(reference.url) });
    expect(plain.code, plain.stderr).toBe(0);

    const file = config(dir.dir, postgresSink(db.url));
    const env = { ...envFor(sim.url), ...options.env };
    const gate = sim.park({ q: 'kettle' });
    const run = startCli(['run', file], { cwd: dir.dir, env });
    await run.whileRunning(gate.reached(1));
    await options.fault(db.url);
    gate.release();
    const stopped = await run.done;
    expect(stopped.code, stopped.stderr).toBe(75);
    expect(stopped.stderr).toMatch(options.message);
    await options.mend(db.url);

    const resumed = await cli(['run', file], { cwd: dir.dir, env });
    expect(resumed.code, resumed.stderr).toBe(0);
    const rows = async (url: string) => (await sql(url, 'SELECT query, country, page, position, rank, url FROM results')).map((r) => JSON.stringify(r)).sort();
    expect(await rows(db.url)).toEqual(await rows(baseline.url));
    expect(sim.stats().credits.main?.debited).toBeLessThanOrEqual((reference.stats().credits.main?.debited ?? 0) + 4);
  } finally {
    await db.drop();
    await baseline.drop();
  }
}

describePostgres('PostgreSQL faults from the command line', () => {
  it('a statement past its time limit (a table locked by someone else): exit 75, nothing lost; the same command then completes as an uninterrupted run', async () => {
    let locker: pg.Client | undefined;
    try {
      await faultThenResume({
        env: { WEBDATA_POSTGRES_STATEMENT_TIMEOUT_MS: '500' },
        async fault(url) {
          locker = new pg.Client({ connectionString: url });
          // Should the test fail before mending, dropping the database cuts this connection: not an error of the test's.
          locker.on('error', () => undefined);
          await locker.connect();
          await locker.query('BEGIN');
          await locker.query('LOCK TABLE public.results IN ACCESS EXCLUSIVE MODE');
        },
        async mend() {
          await locker?.query('ROLLBACK');
          await locker?.end();
        },
        message: /ran past its time limit .*run the same command again/,
      });
    } finally {
      await locker?.end().catch(() => undefined);
    }
  });

  it('the server’s disk full mid-run: exit 75 saying so, nothing lost; once there is room the same command completes as an uninterrupted run', async () => {
    await faultThenResume({
      // The server itself answers an insert with disk_full (SQLSTATE 53100), as it does when it cannot extend a file:
      // a trigger raises it, since filling this machine's disk is not a test's to do.
      fault: async (url) =>
        void (await sql(
          url,
          `CREATE FUNCTION no_room() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$;
           CREATE TRIGGER no_room BEFORE INSERT ON public.results FOR EACH STATEMENT EXECUTE FUNCTION no_room()`,
        )),
      mend: async (url) => void (await sql(url, 'DROP TRIGGER no_room ON public.results')),
      message: /disk is full .*free some space and run the same command again/,
    });
  });
});
