import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { freePort } from './pg-cluster.ts';
import { describePostgres, sql, testDatabase } from './pg.ts';

/** No database chosen anywhere in the environment: the user's own variables blanked (node-postgres reads '' as unset). */
const NOTHING_SET = { DATABASE_URL: '', WEBDATA_STATE_URL: '', PGHOST: '', PGHOSTADDR: '', PGPORT: '', PGUSER: '', PGDATABASE: '', PGPASSWORD: '', PGSSLMODE: '' };
const postgresSink = (url?: string) => ({ sinks: [{ type: 'postgres', table: 'results', ...(url === undefined ? {} : { url }) }] });

describe('PostgreSQL settings that are missing or wrong: exit 2 saying what to set, before any request', () => {
  it('15: no url, no DATABASE_URL and no PG variable: exit 2 naming what to set (it said "cannot be reached … try again", exit 75, crediting unset variables)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, postgresSink());
    const env = { ...envFor(sim.url), ...NOTHING_SET };
    for (const args of [['status', file], ['run', file], ['runs', file], ['export', 'postgres:', '--report', 'spend']]) {
      const result = await cli(args, { cwd: dir.dir, env });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toMatch(/no PostgreSQL database is named: set DATABASE_URL .*or PGHOST/);
      expect(result.stderr).not.toMatch(/cannot be reached|run the same command again/);
    }
    expect(sim.stats().requests).toBe(0);

    // Some set: the label credits those, and only those.
    const port = await freePort();
    const partly = await cli(['status', file], { cwd: dir.dir, env: { ...env, PGHOST: '127.0.0.1', PGPORT: String(port) } });
    expect(partly.code, partly.stderr).toBe(75);
    expect(partly.stderr).toContain(`postgres://127.0.0.1:${port}/`);
    expect(partly.stderr).toContain('(from PGHOST, PGPORT)');
  });

  it('12: an invalid port (in the URL, ?port=, PGPORT): exit 2 naming it (it hung up node, exit 13, or was "cannot be reached", 75)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, postgresSink());
    const env = { ...envFor(sim.url), ...NOTHING_SET };
    const cases: [string[], Record<string, string>, RegExp][] = [
      [['status', file], { PGHOST: '127.0.0.1', PGPORT: 'abc' }, /PGPORT: must be a port, a whole number from 1 to 65535/],
      [['run', file], { PGHOST: '127.0.0.1', PGPORT: '70000' }, /PGPORT: must be a port/],
      [['run', config(dir.dir), '--state', 'postgres://u@127.0.0.1/x?port=abc'], {}, /port: must be a port/],
      [['export', 'postgres://u@127.0.0.1:0/x', '--report', 'spend'], {}, /port: must be a port/],
    ];
    for (const [args, more, message] of cases) {
      const result = await cli(args, { cwd: dir.dir, env: { ...env, ...more } });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toMatch(message);
    }
    expect(sim.stats().requests).toBe(0);
  });

  it('12: a socket directory with no server in it (yet): exit 75, cannot be reached (it was exit 1)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const sockets = mkdtempSync(join(tmpdir(), 'webdata-no-server-'));
    try {
      const url = `postgres://postgres@${encodeURIComponent(sockets)}/postgres`;
      const env = { ...envFor(sim.url), ...NOTHING_SET };
      for (const args of [['status', config(dir.dir, postgresSink(url))], ['run', config(dir.dir), '--state', url], ['export', url, '--report', 'spend']]) {
        const result = await cli(args, { cwd: dir.dir, env });
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(75);
        expect(result.stderr).toMatch(/cannot be reached .*ENOENT.*: no server's socket for port 5432 in the directory .*: start the server, or check the socket directory and port in .*; then run the same command again/);
      }
      // PGHOST naming the directory, as libpq's own tools take it.
      const byHost = await cli(['status', config(dir.dir, postgresSink())], { cwd: dir.dir, env: { ...env, PGHOST: sockets } });
      expect(byHost.code, byHost.stderr).toBe(75);
      expect(sim.stats().requests).toBe(0);
    } finally {
      rmSync(sockets, { recursive: true, force: true });
    }
  });
});

describe('PostgreSQL unreachable at first contact: what the message names, what it says to check, exit 75', () => {
  const scheduled = (url: string) => ({ ...postgresSink(url), schedule: { cron: '0 6 * * *', timezone: 'UTC' } });
  /** A server that takes connections and never answers: node-postgres gives up after its connect timeout (10 s). */
  async function silentServer() {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      port: (server.address() as { port: number }).port,
      [Symbol.asyncDispose]: () => new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
    };
  }

  it('38.14: a sink\'s url at a refused port: run, worker, status and runs name the sink (not "the state store"), say to check postgres.url\'s host and port or start the server, and nothing of committed data', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const port = await freePort();
    const url = `postgres://etl@127.0.0.1:${port}/x`;
    const env = { ...envFor(sim.url), ...NOTHING_SET };
    const sink = `the PostgreSQL sink's database ${url} (table public.results; the run state is kept there too)`;
    for (const args of [['run', config(dir.dir, postgresSink(url))], ['worker', config(dir.dir, scheduled(url))], ['status', config(dir.dir, postgresSink(url))], ['runs', config(dir.dir, postgresSink(url))]]) {
      const result = await cli(args, { cwd: dir.dir, env });
      expect(result.code, `${args[0]}: ${result.stderr}`).toBe(75);
      expect(result.stderr).toContain(`${sink} cannot be reached (connect ECONNREFUSED 127.0.0.1:${port}): no server listens at 127.0.0.1, port ${port}: check the host and port in postgres.url, or start the server; then run the same command again`);
      expect(result.stderr).not.toMatch(/the state store|committed data/);
    }

    // A sink of its own beside a SQLite state store; the state store by --state; a sink's database by DATABASE_URL.
    const cases: [string[], Record<string, string>, string][] = [
      [['run', config(dir.dir, { name: 'beside', sinks: [{ type: 'sqlite', path: 'out/r.sqlite' }, ...postgresSink(url).sinks] })], {}, `the PostgreSQL sink ${url}, table public.results cannot be reached`],
      [['run', config(dir.dir), '--state', url], {}, `the state store ${url} cannot be reached`],
      [['run', config(dir.dir, postgresSink())], { DATABASE_URL: url }, `check the host and port in DATABASE_URL, or start the server`],
      [['run', config(dir.dir, postgresSink())], { PGHOST: '127.0.0.1', PGPORT: String(port) }, `check the host and port in PGHOST, PGPORT, or start the server`],
    ];
    for (const [args, more, message] of cases) {
      const result = await cli(args, { cwd: dir.dir, env: { ...env, ...more } });
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(75);
      expect(result.stderr).toContain(message);
      expect(result.stderr).toContain(`no server listens at 127.0.0.1, port ${port}: check the host and port in `);
      expect(result.stderr).not.toMatch(/committed data/);
    }
    expect(sim.stats().requests).toBe(0);
  });

  it('38.14: a host name that does not resolve, and a server that never answers: each says what to check (exit 75, before any request)', async () => {
    await using sim = await simulator();
    await using silent = await silentServer();
    using dir = workdir();
    const env = { ...envFor(sim.url), ...NOTHING_SET, WEBDATA_ALLOWED_DB_HOSTS: 'db.nowhere.invalid' };
    // .invalid never resolves (RFC 6761); a resolver that cannot be asked at all says so in its own words (EAI_AGAIN).
    const unknown = await cli(['run', config(dir.dir, postgresSink('postgres://etl@db.nowhere.invalid:5432/x'))], { cwd: dir.dir, env });
    expect(unknown.code, unknown.stderr).toBe(75);
    expect(unknown.stderr).toMatch(/the host name db\.nowhere\.invalid (is not known|could not be looked up \(DNS did not answer\)): check the host in postgres\.url/);
    expect(unknown.stderr).not.toMatch(/committed data/);

    const quiet = await cli(['status', config(dir.dir, { name: 'silent', state: { url: `postgres://etl@127.0.0.1:${silent.port}/x` } })], { cwd: dir.dir, env });
    expect(quiet.code, quiet.stderr).toBe(75);
    expect(quiet.stderr).toContain(`no answer from 127.0.0.1, port ${silent.port} within 10 s: check the host and port in state.url (a firewall may drop the connection), or whether the server is up`);
    expect(quiet.stderr).not.toMatch(/committed data/);
    expect(sim.stats().requests).toBe(0);
  });
});

describePostgres('PostgreSQL settings the server cannot meet', () => {
  it('38.1: ?port= decides the server as node-postgres connects: a sink on another port of the state\'s host and database is a database of its own (its rows went to the state\'s server)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const { port } = new URL(db.url);
      const refused = await freePort();
      const stateUrl = `postgres://postgres@127.0.0.1/${db.name}?port=${port}`;
      const sinkUrl = `postgres://postgres@127.0.0.1/${db.name}?port=${refused}`;
      const file = config(dir.dir, { name: 'two-ports', state: { url: stateUrl }, ...postgresSink(sinkUrl) });
      const result = await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), ...NOTHING_SET } });
      const [landed] = await sql(db.url, `SELECT to_regclass('public.results')::text AS results`);
      expect(landed?.results ?? null, 'a results table in the state\'s database, which the sink does not name').toBeNull();
      expect(result.code, result.stderr).toBe(75);
      expect(result.stderr).toContain(`the PostgreSQL sink ${sinkUrl}, table public.results cannot be reached (connect ECONNREFUSED 127.0.0.1:${refused}): no server listens at 127.0.0.1, port ${refused}`);
      expect(sim.stats().requests).toBe(0);
    } finally {
      await db.drop();
    }
  });

  it('12: status --state-schema that is not a PostgreSQL name: exit 2 naming the flag (it was exit 1)', async () => {
    using dir = workdir();
    const db = await testDatabase();
    try {
      const result = await cli(['status', config(dir.dir), '--state', db.url, '--state-schema', 'x"; DROP TABLE y; --'], { cwd: dir.dir });
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(/--state-schema: must be a PostgreSQL name/);
    } finally {
      await db.drop();
    }
  });

  it('12: sslmode=require (or PGSSLMODE) against a server without TLS: exit 2 saying so (it was exit 1)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const required = `${db.url}?sslmode=require`;
      const cases: [string[], Record<string, string>][] = [
        [['status', config(dir.dir), '--state', required], {}],
        [['run', config(dir.dir, postgresSink(db.url))], { PGSSLMODE: 'require' }],
        [['export', required, '--report', 'spend'], {}],
      ];
      for (const [args, more] of cases) {
        const result = await cli(args, { cwd: dir.dir, env: { ...envFor(sim.url), ...more } });
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toMatch(/does not support SSL connections.*sslmode/);
      }
      expect(sim.stats().requests).toBe(0);
    } finally {
      await db.drop();
    }
  });
});
