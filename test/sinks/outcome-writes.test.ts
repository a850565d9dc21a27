import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresOutcomeStatements, postgresTrackedStatements, sqliteOutcomeStatements, sqliteTrackedStatements } from '../../src/sinks/statements.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

/*
 * Every worker of a distributed run that finishes records the plan's outcomes (and tracked ranks) at its close: a
 * record that says what the table already holds writes nothing, so that the close writes what changed, not a row per
 * series of the plan per worker (issue 43, item 8).
 */

describe('outcomes and tracked ranks in SQLite: a record the table already holds writes nothing', () => {
  it('counts a change only for a row that changes: again as it was, 0; incomplete to complete, 1; complete stays complete', () => {
    const db = new Database(':memory:');
    const o = sqliteOutcomeStatements('results');
    db.exec(o.create);
    const record = db.prepare(o.record);
    const write = (query: string, complete: number, reason: string, run = 'run-1', force = 0) => record.run({ run, query, country: 'us', lang: 'en', complete, reason, force }).changes;
    expect(write('a', 1, 'exhausted') + write('b', 0, 'budget')).toBe(2);
    // A second worker's close, as the first left them.
    expect(write('a', 1, 'exhausted') + write('b', 0, 'budget')).toBe(0);
    expect(write('b', 1, 'max_pages')).toBe(1);
    expect(write('a', 0, 'interrupted')).toBe(0);
    expect(db.prepare('SELECT query, complete, reason FROM results_outcomes ORDER BY query').all()).toEqual([
      { query: 'a', complete: 1, reason: 'exhausted' },
      { query: 'b', complete: 1, reason: 'max_pages' },
    ]);
    // Not reached: written where it is news (its latest row says otherwise), not again, not for a series no run reached.
    expect(write('a', 0, 'not_reached', 'run-2')).toBe(1);
    expect(write('a', 0, 'not_reached', 'run-3')).toBe(0);
    expect(write('n', 0, 'not_reached', 'run-3')).toBe(0);
    // …but for the first a process records of a run, whatever it is: the run is in the table.
    expect(write('n', 0, 'not_reached', 'run-4', 1)).toBe(1);
    const k = sqliteTrackedStatements('results');
    db.exec(k.create);
    const track = db.prepare(k.record);
    const rank = (value: number | null) => track.run('run-1', 'a', 'us', 'en', 'example.com', value, 10).changes;
    expect(rank(3)).toBe(1);
    expect(rank(3)).toBe(0);
    expect(rank(null)).toBe(1);
    expect(rank(null)).toBe(0);
    db.close();
  });
});

describePostgres('outcomes and tracked ranks in PostgreSQL: a record the table already holds writes nothing', () => {
  it('counts a row only where it changes: a second close of the same plan writes none', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 1 });
    try {
      const o = postgresOutcomeStatements('public', 'results');
      for (const text of o.create) await pool.query(text);
      const write = async (rows: [string, number, string][]) =>
        (await pool.query(o.record, ['run-1', rows.map((r) => r[0]), rows.map(() => 'us'), rows.map(() => 'en'), rows.map((r) => r[1]), rows.map((r) => r[2]), false])).rowCount;
      // `c`, not reached and in no run before: no news, no row.
      expect(await write([['a', 1, 'exhausted'], ['b', 0, 'budget'], ['c', 0, 'not_reached']])).toBe(2);
      expect(await write([['a', 1, 'exhausted'], ['b', 0, 'budget'], ['c', 0, 'not_reached']])).toBe(0);
      expect(await write([['a', 0, 'interrupted'], ['b', 1, 'max_pages'], ['c', 0, 'budget']])).toBe(2);
      const { rows } = await pool.query('SELECT query, complete, reason FROM results_outcomes ORDER BY query');
      expect(rows).toEqual([
        { query: 'a', complete: 1, reason: 'exhausted' },
        { query: 'b', complete: 1, reason: 'max_pages' },
        { query: 'c', complete: 0, reason: 'budget' },
      ]);
      const k = postgresTrackedStatements('public', 'results');
      for (const text of k.create) await pool.query(text);
      const rank = async (value: number | null) => (await pool.query(k.record, ['run-1', ['a'], ['us'], ['en'], ['example.com'], [value], [10]])).rowCount;
      expect(await rank(3)).toBe(1);
      expect(await rank(3)).toBe(0);
      expect(await rank(null)).toBe(1);
      expect(await rank(null)).toBe(0);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
