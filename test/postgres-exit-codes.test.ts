import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { simulator } from './helpers.ts';
import { cli, config, envFor } from './cli-helpers.ts';
import { workdir } from './pipeline-helpers.ts';
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
        expect(result.stderr).toMatch(/cannot be reached .*ENOENT.*run the same command again once the server is back/);
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
      expect(result.stderr).toContain(`the PostgreSQL sink ${sinkUrl}, table public.results cannot be reached (connect ECONNREFUSED 127.0.0.1:${refused})`);
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
