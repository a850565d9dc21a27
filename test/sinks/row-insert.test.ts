import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { rowInserter } from '../../src/commits/row-insert.ts';

const table = () => {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER, n INTEGER)');
  return db;
};

describe('rows inserted several to a statement', () => {
  it('every row, in order, whatever the count: full statements and the rest', () => {
    for (const count of [0, 1, 15, 16, 17, 37, 100]) {
      const db = table();
      const values = Array.from({ length: count }, (_, i) => [`k${i}`, i, null]).flat();
      rowInserter(db)({ into: 'INSERT INTO t (k, v, n)', width: 3, then: '' }, values);
      expect(db.prepare('SELECT k, v, n FROM t ORDER BY rowid').raw().all().flat()).toEqual(values);
    }
  });

  it('an upsert: a later row of the same statement updates the earlier one with its key, as separate statements would', () => {
    const db = table();
    const upsert = { into: 'INSERT INTO t (k, v, n)', width: 3, then: ' ON CONFLICT (k) DO UPDATE SET v = excluded.v, n = t.n + 1' };
    // 20 rows, keys a, b, a, b, …: the 16 of the first statement and the 4 of the second.
    const values = Array.from({ length: 20 }, (_, i) => [i % 2 === 0 ? 'a' : 'b', i, 0]).flat();
    rowInserter(db)(upsert, values);
    expect(db.prepare('SELECT k, v, n FROM t ORDER BY k').all()).toEqual([
      { k: 'a', v: 18, n: 9 },
      { k: 'b', v: 19, n: 9 },
    ]);
  });

  it('values that are not whole rows are refused before anything is written', () => {
    const db = table();
    expect(() => rowInserter(db)({ into: 'INSERT INTO t (k, v, n)', width: 3, then: '' }, ['a', 1, 0, 'b', 2])).toThrow('5 values are not whole rows of 3');
    expect(db.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: 0 });
  });
});
