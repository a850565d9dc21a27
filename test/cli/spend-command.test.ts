// `webdata-etl spend` (docs/cli.md, docs/credits.md#where-the-credits-went): where the credits went, from the state
// database's webdata_spend, by day, key or pipeline, as a table or JSON lines; after real runs from the command line,
// and over spend written through a store as runs write it (an allowance, holds), in SQLite and in PostgreSQL.
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { createSpendView } from '../../src/analytics/views.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { debited, KEYS, POOL, poolSimulator, allowanceSpend } from '../analytics/spend-fixture.ts';
import { cli, config } from '../cli-helpers.ts';
import { noKeyIn, workdir } from '../pipeline-helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);

/** The table's rows as cells (two spaces or more between them), the header first. */
const table = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .map((line) => line.split(/ {2,}/));

describe('webdata-etl spend after runs from the command line', () => {
  it('two pipelines sharing a state file, two keys: by key, by pipeline and by day, each adding up to the simulator’s count', async () => {
    await using sim = await poolSimulator();
    using dir = workdir();
    const state = { path: 'shared.sqlite' };
    const search = { queries: ['espresso', 'kettle', 'scale'], countries: ['us', 'gb'], maxPages: 2 };
    // One request at a time per key: the series go to both keys.
    const options = (name: string) => ({ name, state, sinks: [{ type: 'csv', path: `out/${name}.csv` }], rate: { concurrency: 1 } });
    const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL };
    const alpha = config(dir.dir, options('alpha'), search);
    expect((await cli(['run', alpha], { cwd: dir.dir, env })).code).toBe(0);
    const afterAlpha = debited(sim);
    const beta = config(dir.dir, options('beta'), { ...search, queries: ['grinder', 'tamper'] });
    expect((await cli(['run', beta], { cwd: dir.dir, env })).code).toBe(0);
    const all = debited(sim);
    expect(afterAlpha.north).toBeGreaterThan(0);
    expect(afterAlpha.south).toBeGreaterThan(0);
    expect(all.north).toBeGreaterThan(afterAlpha.north ?? 0);
    expect(all.south).toBeGreaterThan(afterAlpha.south ?? 0);

    // By key: one line per key (no allowance: no period), its credits the simulator's for it.
    const byKey = await cli(['spend', 'shared.sqlite', '--by', 'key', '--json'], { cwd: dir.dir });
    expect(byKey.code, byKey.stderr).toBe(0);
    expect(lines(byKey.stdout)).toEqual([
      { key: 'north', keyFingerprint: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/), period: null, credits: all.north, requests: expect.any(Number), allowance: null, left: null, share: null },
      { key: 'south', keyFingerprint: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/), period: null, credits: all.south, requests: expect.any(Number), allowance: null, left: null, share: null },
    ]);
    // By pipeline: each pipeline's part of each key, from the pipeline's file (its state store) as from the database.
    const byPipeline = lines((await cli(['spend', beta, '--by', 'pipeline', '--json'], { cwd: dir.dir })).stdout);
    expect(byPipeline.map((line) => [line.pipeline, line.key, line.credits])).toEqual([
      ['alpha', 'north', afterAlpha.north],
      ['alpha', 'south', afterAlpha.south],
      ['beta', 'north', (all.north ?? 0) - (afterAlpha.north ?? 0)],
      ['beta', 'south', (all.south ?? 0) - (afterAlpha.south ?? 0)],
    ]);
    // By day (the default), as a table: the runs' day (UTC: no allowance), each key's credits.
    const byDay = await cli(['spend', 'shared.sqlite'], { cwd: dir.dir });
    expect(byDay.code).toBe(0);
    const [header, ...rows] = table(byDay.stdout);
    expect(header).toEqual(['day', 'key', 'credits', 'requests', 'allowance', 'left', 'share']);
    expect(rows.reduce((sum, row) => sum + Number(row[2]), 0)).toBe((all.north ?? 0) + (all.south ?? 0));
    for (const row of rows) {
      expect(row[0]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(row.slice(4)).toEqual(['-', '-', '-']);
    }
    noKeyIn(dir.dir, byKey.stdout + byKey.stderr + byDay.stdout + byDay.stderr, Object.values(KEYS));
  });

  it('bad usage exits 2 naming what is valid; a database with no spend says so, exit 0', async () => {
    using dir = workdir();
    const badBy = await cli(['spend', 'x.sqlite', '--by', 'week'], { cwd: dir.dir });
    expect(badBy.code).toBe(2);
    expect(badBy.stderr).toContain('--by must be one of day, key, pipeline (got "week")');
    const unknown = await cli(['spend', 'x.sqlite', '--per', 'day'], { cwd: dir.dir });
    expect(unknown.code).toBe(2);
    const two = await cli(['spend', 'a.sqlite', 'b.sqlite'], { cwd: dir.dir });
    expect(two.code).toBe(2);
    expect(two.stderr).toContain('spend takes one pipeline file or state database');
    const schemas = await cli(['spend', 'postgres://etl@127.0.0.1:1/x', '--schema', 'a', '--state-schema', 'b'], { cwd: dir.dir });
    expect(schemas.code).toBe(2);
    expect(schemas.stderr).toContain('--schema and --state-schema name the same schema here');
    const missing = await cli(['spend', 'none.sqlite'], { cwd: dir.dir });
    expect(missing.code).toBe(0);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain('no spend yet (none.sqlite does not exist)');
    // A state file no run of this webdata-etl opened: no view yet.
    new Database(dir.path('old.sqlite')).exec('CREATE TABLE spend (run_id TEXT)').close();
    const old = await cli(['spend', 'old.sqlite', '--json'], { cwd: dir.dir });
    expect(old.code).toBe(0);
    expect(old.stdout).toBe('');
    expect(old.stderr).toContain('has no webdata_spend view: the next run on it makes it');
    const help = await cli(['spend', '--help'], { cwd: dir.dir });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: webdata-etl spend');
  });
});

/** `spend --by key` of `allowanceSpend`'s rows: the allowance's periods (today's and an earlier one), a key without one, no key. */
function expectedByKey(period: string) {
  const north = { keyFingerprint: 'fp-north', allowance: { credits: 100, per: 'day', timezone: 'Europe/Berlin' } };
  return [
    { key: null, keyFingerprint: null, period: null, credits: 1, requests: 1, allowance: null, left: null, share: null },
    // Two pipelines label the key differently: one key, both labels, on every line of it.
    { key: 'n2/north', ...north, period: '2026-01-01', credits: 5, requests: 1, left: 95, share: 0.05 },
    { key: 'n2/north', ...north, period, credits: 7, requests: 5, left: 70, share: 0.07 },
    { key: 'south', keyFingerprint: 'fp-south', period: null, credits: 4, requests: 1, allowance: null, left: null, share: null },
  ].sort((a, b) => (`${a.key ?? ''} ${a.period}` < `${b.key ?? ''} ${b.period}` ? -1 : 1));
}

describe('webdata-etl spend with an allowance (SQLite)', () => {
  it('by key: the allowance, what is left of each period and the share spent; today’s period shown spent or not', async () => {
    using dir = workdir();
    const db = new Database(dir.path('state.sqlite'));
    const store = sqliteStateStore(db);
    createSpendView(db);
    const period = await allowanceSpend(store, async () => {});
    // Another key's allowance, nothing spent of it yet: its period today, all of it left.
    await store.declareAllowance({ fingerprint: 'fp-idle', label: 'idle', pipeline: 'alpha', allowance: { credits: 500, per: 'month', timezone: 'UTC' } });
    db.close();
    const json = await cli(['spend', 'state.sqlite', '--by', 'key', '--json'], { cwd: dir.dir });
    expect(json.code, json.stderr).toBe(0);
    const shown = lines(json.stdout);
    const idle = shown.find((line) => line.key === 'idle');
    expect(idle).toMatchObject({ keyFingerprint: 'fp-idle', period: expect.stringMatching(/^\d{4}-\d{2}$/), credits: 0, requests: 0, left: 500, share: 0 });
    expect(shown.filter((line) => line !== idle)).toEqual(expectedByKey(period));
    // The table: the allowance as credits/period (zone), left, and the share as a percentage.
    const text = await cli(['spend', 'state.sqlite', '--by', 'key'], { cwd: dir.dir });
    const rows = table(text.stdout);
    expect(rows[0]).toEqual(['key', 'period', 'credits', 'requests', 'allowance', 'left', 'share']);
    expect(rows).toContainEqual(['n2/north', period, '7', '5', '100/day (Europe/Berlin)', '70', '7%']);
    expect(rows).toContainEqual(['south', '-', '4', '1', '-', '-', '-']);
    expect(rows).toContainEqual(['(none)', '-', '1', '1', '-', '-', '-']);
    // By pipeline: each pipeline's part of the period, against the whole allowance.
    const byPipeline = lines((await cli(['spend', 'state.sqlite', '--by', 'pipeline', '--json'], { cwd: dir.dir })).stdout);
    expect(byPipeline.map((line) => [line.pipeline, line.key, line.period, line.credits, line.left, line.share])).toEqual([
      ['alpha', 'north', '2026-01-01', 5, 95, 0.05],
      ['alpha', 'north', period, 3, 70, 0.03],
      ['alpha', 'south', null, 4, null, null],
      ['beta', 'n2', period, 4, 70, 0.04],
      ['legacy', null, null, 1, null, null],
    ]);
  });

  it('a label with a terminal’s escape in a tampered file is printed without it', async () => {
    using dir = workdir();
    const db = new Database(dir.path('state.sqlite'));
    sqliteStateStore(db);
    createSpendView(db);
    db.prepare(`INSERT INTO spend (run_id, at, series_id, path, attempt, status, credits, uncertain, latency_ms, key_label, pipeline, day) VALUES ('r', '2026-11-26T10:00:00Z', 's', '/p', 1, '200', 1, 0, 1, ?, 'p', '2026-11-26')`).run('evil\u001b[2J\u0007');
    db.close();
    const text = await cli(['spend', 'state.sqlite'], { cwd: dir.dir });
    expect(text.code).toBe(0);
    expect(text.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f]/);
    expect(text.stdout).toContain('evil?[2J?');
  });
});

describePostgres('webdata-etl spend with an allowance (PostgreSQL)', () => {
  it('the same lines as SQLite’s, from a postgres:// URL', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const store = await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'alpha' });
      await createPostgresSpendView(pool, 'webdata');
      const period = await allowanceSpend(store, async () => {});
      const json = await cli(['spend', db.url, '--by', 'key', '--json'], { cwd: process.cwd() });
      expect(json.code, json.stderr).toBe(0);
      expect(lines(json.stdout)).toEqual(expectedByKey(period));
      // The state's schema by --state-schema (or --schema): another schema holds nothing.
      const other = await cli(['spend', '--database-url', db.url, '--schema', 'elsewhere'], { cwd: process.cwd() });
      expect(other.code).toBe(0);
      expect(other.stderr).toContain('has no webdata_spend view');
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
