// `estimate` says how much of the keys' allowances a run's worst case would take (docs/credits.md#allowances): each
// key's allowance — the pipeline's, or the one the state database records by the key's fingerprint — and what is left
// of its period, read from the state database (SQLite or PostgreSQL), never written; nothing sent.
import { existsSync, mkdirSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { keyFingerprint } from '../../src/client/api-keys.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { KEYS, POOL, spendRow } from '../analytics/spend-fixture.ts';
import { cli, config } from '../cli-helpers.ts';
import { noKeyIn, workdir } from '../pipeline-helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

const env = { WEBDATA_API_KEYS: POOL };
/** 2 queries × 2 countries × 3 pages: 12 credits at worst. */
const search = { queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 3 };

/**
 * What another pipeline left in the state database: `north`'s allowance of 50 credits a day (UTC), recorded by
 * "other", 20 of them spent today and 5 held by a run at work. Resolves to today's period.
 */
async function recordedElsewhere(store: StateStore): Promise<string> {
  const north = keyFingerprint(KEYS.north, await store.keySecret());
  await store.declareAllowance({ fingerprint: north, label: 'n', pipeline: 'other', allowance: { credits: 50, per: 'day', timezone: 'UTC' } });
  const hold = await store.holdAllowance({ fingerprint: north, holder: 'h', pipeline: 'other', runId: 'run-o', want: 25, ttlMs: 600_000 });
  const period = hold?.period.key as string;
  await store.spend([spendRow('run-o', 'other', { fingerprint: north, label: 'n', period, holder: 'h' }, 20)]);
  return period;
}

const allowanceOf = (stdout: string) => (JSON.parse(stdout) as { allowance?: unknown }).allowance;

describe('estimate and the keys’ allowances (SQLite state)', () => {
  it('the pipeline’s allowance, no state file yet: the worst case against two keys’ whole allowances; no file made', async () => {
    using dir = workdir();
    const file = config(dir.dir, { allowance: { credits: 10, per: 'day', timezone: 'Europe/Berlin' } }, search);
    const text = await cli(['estimate', file], { cwd: dir.dir, env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('allowance: the worst case (12 credits) takes 60% of the 20 credits left this period (it fits)');
    expect(text.stdout).toContain('  north: 10 credits a day (Europe/Berlin), declared by this pipeline; what is left of it unknown (no run has recorded this key yet)');
    expect(existsSync(dir.path('out/results.sqlite'))).toBe(false);
    // One key's own allowance, smaller than the worst case's share: it does not fit.
    const tight = config(dir.dir, { allowance: { credits: 5, per: 'month' }, keys: { south: { allowance: { credits: 1, per: 'day' } } } }, search);
    const json = await cli(['estimate', tight, '--json'], { cwd: dir.dir, env });
    expect(allowanceOf(json.stdout)).toEqual({
      keys: [
        { label: 'north', allowance: { credits: 5, per: 'month', timezone: 'UTC' }, from: 'pipeline', use: null, unknown: 'no run has recorded this key yet' },
        { label: 'south', allowance: { credits: 1, per: 'day', timezone: 'UTC' }, from: 'pipeline', use: null, unknown: 'no run has recorded this key yet' },
      ],
      worstCase: 12,
      left: 6,
      share: 2,
      fits: false,
    });
    expect((await cli(['estimate', tight], { cwd: dir.dir, env })).stdout).toContain('(it does not fit: the run will stop at the allowance (status allowance) and go on when the period opens again)');
    // No allowance anywhere: no allowance line.
    expect((await cli(['estimate', config(dir.dir, {}, search)], { cwd: dir.dir, env })).stdout).not.toContain('allowance');
    noKeyIn(dir.dir, text.stdout + text.stderr + json.stdout, Object.values(KEYS));
  });

  it('the state database’s record of a key, what its period took and holds; a key without one; a pipeline whose declaration conflicts', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out'));
    const db = new Database(dir.path('out/results.sqlite'));
    const period = await recordedElsewhere(sqliteStateStore(db));
    db.close();
    const before = statSync(dir.path('out/results.sqlite')).mtimeMs;
    // This pipeline declares none: the record binds north; south has no allowance, so the worst case is not bounded.
    const file = config(dir.dir, {}, search);
    const text = await cli(['estimate', file], { cwd: dir.dir, env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('allowance: a key has none, so the worst case (12 credits) is not bounded by the allowances');
    expect(text.stdout).toMatch(new RegExp(`  north: 50 credits a day \\(UTC\\), recorded in the state database: 20 spent, 5 held, 25 left in ${period} \\(until \\d{4}-\\d{2}-\\d{2} 00:00 UTC\\)`));
    expect(text.stdout).toContain('  south: no allowance');
    // South bound too, by the pipeline: the worst case against what both have left.
    const both = config(dir.dir, { keys: { south: { allowance: { credits: 100, per: 'month' } } } }, search);
    const json = allowanceOf((await cli(['estimate', both, '--json'], { cwd: dir.dir, env })).stdout) as { keys: unknown[]; left: number; share: number; fits: boolean };
    expect(json.keys[0]).toMatchObject({ label: 'north', from: 'state', allowance: { credits: 50, per: 'day', timezone: 'UTC' }, use: { period, spent: 20, held: 5, left: 25 } });
    expect(json.keys[1]).toMatchObject({ label: 'south', from: 'pipeline', use: { period: expect.stringMatching(/^\d{4}-\d{2}$/), spent: 0, held: 0, left: 100 } });
    expect(json).toMatchObject({ left: 125, share: 0.096, fits: true });
    // Another allowance for north than "other" recorded: a run would be refused, and estimate says so.
    const conflicting = config(dir.dir, { allowance: { credits: 80, per: 'day' } }, search);
    expect((await cli(['estimate', conflicting], { cwd: dir.dir, env })).stdout).toContain(
      '  north: this pipeline declares 80 credits a day (UTC), but pipeline "other" recorded 50 credits a day (UTC): a run would be refused (exit 2)',
    );
    // Read, never written.
    expect(statSync(dir.path('out/results.sqlite')).mtimeMs).toBe(before);
    noKeyIn(dir.dir, text.stdout + text.stderr, Object.values(KEYS));
  });

  it('a state file that cannot be read leaves the allowances unsaid, with a warning, exit 0', async () => {
    using dir = workdir();
    mkdirSync(dir.path('out'));
    const db = new Database(dir.path('out/results.sqlite'));
    db.exec('CREATE TABLE key_allowances (fingerprint TEXT)');
    db.exec("CREATE TABLE webdata_meta (key TEXT, value TEXT); INSERT INTO webdata_meta VALUES ('key_secret', 'c2VjcmV0')");
    db.close();
    const text = await cli(['estimate', config(dir.dir, {}, search)], { cwd: dir.dir, env });
    expect(text.code).toBe(0);
    expect(text.stderr).toContain("the keys' allowances were not read from the state database");
    expect(text.stdout).toContain('credits (worst case): 12');
  });
});

describePostgres('estimate and the keys’ allowances (PostgreSQL state)', () => {
  it('the record and its period’s use, read from the state schema given by WEBDATA_STATE_URL', async () => {
    using dir = workdir();
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const period = await recordedElsewhere(await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'other' }));
      const file = config(dir.dir, { keys: { south: { allowance: { credits: 100, per: 'month' } } } }, search);
      const json = allowanceOf((await cli(['estimate', file, '--json'], { cwd: dir.dir, env: { ...env, WEBDATA_STATE_URL: db.url } })).stdout);
      expect(json).toMatchObject({ keys: [{ label: 'north', from: 'state', use: { period, spent: 20, held: 5, left: 25 } }, { label: 'south', from: 'pipeline', use: { left: 100 } }], left: 125, fits: true });
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
