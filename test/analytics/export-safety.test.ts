import { linkSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { exportReport } from '../../src/analytics/index.ts';
import { writeReport } from '../../src/report/index.ts';
import { writeOutputFile, writeOutputFileWith } from '../../src/output-file.ts';
import { handMadeDatabase } from './analytics-fixture.ts';
import { cli } from '../cli-helpers.ts';
import { expectRefused, thrown } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

const FORMATS = ['csv', 'jsonl', 'parquet'] as const;


/**
 * A rankings view of 5000 rows that raises an SQL error on its 3000th: it is read in index order (no sort first), so
 * the export has written its first batch (2000 rows) before the error.
 */
function failingDatabase(path: string) {
  const db = new Database(path);
  db.exec(`CREATE TABLE base (query TEXT NOT NULL, country TEXT NOT NULL, lang TEXT NOT NULL, rank INTEGER NOT NULL);
    CREATE INDEX base_order ON base (query, country, lang, rank);
    CREATE VIEW report_rankings AS SELECT query, country, lang, rank,
      CASE WHEN rank = 3000 THEN json_extract('not json', '$') ELSE 'Title ' || rank END AS title,
      'https://x.com/' || rank AS url, 'x.com' AS domain, 1 AS page, rank AS position, 'k' || rank AS dedupe_key, 'r1' AS run_id, 't' AS fetched_at
    FROM base;`);
  const insert = db.prepare(`INSERT INTO base VALUES ('q', 'us', 'en', ?)`);
  db.transaction(() => {
    for (let rank = 1; rank <= 5000; rank += 1) insert.run(rank);
  })();
  db.close();
}

describe('an output never overwrites the database it is made from', () => {
  it('export and report refuse the database itself, its -wal, -shm and -journal, by symlink, .. or hard link, before writing anything', async () => {
    using dir = workdir();
    const db = dir.path('hand.sqlite');
    handMadeDatabase(db);
    // A live WAL beside it, as while a pipeline runs.
    const writer = new Database(db);
    writer.pragma('journal_mode = WAL');
    writer.exec(`CREATE TABLE IF NOT EXISTS keep (x)`);
    symlinkSync(db, dir.path('link.sqlite'));
    symlinkSync(dir.dir, dir.path('alias'));
    linkSync(db, dir.path('hard.sqlite'));
    const before = readFileSync(db);
    const wal = readFileSync(`${db}-wal`);
    const names: [database: string, out: string][] = [
      [db, db],
      [db, dir.path('sub/../hand.sqlite')],
      [db, dir.path('alias/hand.sqlite')],
      [db, dir.path('link.sqlite')],
      [db, dir.path('hard.sqlite')],
      [db, `${db}-wal`],
      [db, `${db}-shm`],
      [db, `${db}-journal`],
      // Read through a link, SQLite's companions sit beside the real file.
      [dir.path('link.sqlite'), `${db}-wal`],
      [dir.path('link.sqlite'), dir.path('link.sqlite-journal')],
    ];
    mkdirSync(dir.path('sub'));
    for (const [database, out] of names) {
      for (const format of FORMATS) expectRefused(await thrown(() => exportReport({ database, report: 'rankings', format, out })), 'out', /database being read/);
      expectRefused(await thrown(() => writeReport({ database, out })), 'out', /database being read/);
    }
    expectRefused(await thrown(() => exportReport({ database: db, report: 'rankings', out: dir.dir })), 'out', /is a directory/);
    expect(readFileSync(db).equals(before)).toBe(true);
    expect(readFileSync(`${db}-wal`).equals(wal)).toBe(true);
    expect(readdirSync(dir.dir).sort()).toEqual(['alias', 'hand.sqlite', 'hand.sqlite-shm', 'hand.sqlite-wal', 'hard.sqlite', 'link.sqlite', 'sub']);
    writer.close();
  });

  it('on the command line: exit 2 naming --out, the database intact', async () => {
    using dir = workdir();
    handMadeDatabase(dir.path('db'));
    const before = readFileSync(dir.path('db'));
    for (const args of [
      ['export', 'db', '--report', 'rankings', '--out', 'db'],
      ['export', 'db', '--report', 'items', '--format', 'parquet', '--out', './db'],
      ['report', 'db', '--out', 'db'],
    ]) {
      const result = await cli(args, { cwd: dir.dir });
      expect([args.join(' '), result.code]).toEqual([args.join(' '), 2]);
      expect(result.stderr).toMatch(/--out: (\.\/)?db is the database being read/);
    }
    expect(readFileSync(dir.path('db')).equals(before)).toBe(true);
  });
});

describe('exports and reports are written whole or not at all', () => {
  it('an export that fails part way leaves the target as it was (or absent) and no temporary file', async () => {
    using dir = workdir();
    const db = dir.path('failing.sqlite');
    failingDatabase(db);
    // The failure comes mid-export: to a stream, the header and the first 2000 rows were written before it.
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    const error = await thrown(() => exportReport({ database: db, report: 'rankings', format: 'csv', out: stream }));
    expect(String(error)).toContain('malformed JSON');
    expect(chunks.join('').trim().split('\r\n')).toHaveLength(2001);

    mkdirSync(dir.path('out'));
    for (const format of FORMATS) {
      writeFileSync(dir.path(`out/previous.${format}`), 'what was there before');
      for (const name of [`previous.${format}`, `absent.${format}`]) {
        const failed = await thrown(() => exportReport({ database: db, report: 'rankings', format, out: dir.path(`out/${name}`), batchRows: 1000 }));
        expect([format, String(failed)]).toEqual([format, expect.stringContaining('malformed JSON')]);
      }
      expect(readFileSync(dir.path(`out/previous.${format}`), 'utf8')).toBe('what was there before');
    }
    // Nothing else: no absent.* file and no temporary file.
    expect(readdirSync(dir.path('out')).sort()).toEqual(['previous.csv', 'previous.jsonl', 'previous.parquet']);
  });

  it('a failed write leaves nothing behind; a symlinked target is followed, the link kept', async () => {
    using dir = workdir();
    writeFileSync(dir.path('kept.json'), 'before');
    const error = await thrown(() =>
      writeOutputFileWith(dir.path('kept.json'), async (file) => {
        await file.write('half of it');
        throw new Error('the writer failed');
      }),
    );
    expect(String(error)).toContain('the writer failed');
    expect(readFileSync(dir.path('kept.json'), 'utf8')).toBe('before');
    expect(readdirSync(dir.dir)).toEqual(['kept.json']);

    mkdirSync(dir.path('real'));
    writeFileSync(dir.path('real/summary.json'), 'old');
    symlinkSync(dir.path('real/summary.json'), dir.path('summary.json'));
    writeOutputFile(dir.path('summary.json'), '{"new":true}');
    expect(statSync(dir.path('summary.json'), { throwIfNoEntry: true }).isFile()).toBe(true);
    expect(readFileSync(dir.path('real/summary.json'), 'utf8')).toBe('{"new":true}');
    expect(readdirSync(dir.path('real'))).toEqual(['summary.json']);
    writeOutputFile(dir.path('new/dir/file.txt'), 'made with its directories');
    expect(readFileSync(dir.path('new/dir/file.txt'), 'utf8')).toBe('made with its directories');
  });
});

describe('file modes of exports and reports', () => {
  it('created 0600 (a stricter umask narrows them); an existing file keeps the mode its owner chose', async () => {
    for (const [umask, mode] of [
      [0o022, 0o600],
      [0o077, 0o600],
      [0o277, 0o400],
    ] as const) {
      using dir = workdir();
      handMadeDatabase(dir.path('hand.sqlite'));
      mkdirSync(dir.path('out'));
      const previous = process.umask(umask);
      try {
        for (const format of FORMATS) await exportReport({ database: dir.path('hand.sqlite'), report: 'domains', format, out: dir.path(`out/domains.${format}`) });
        await writeReport({ database: dir.path('hand.sqlite'), out: dir.path('out/report.html') });
      } finally {
        process.umask(previous);
      }
      for (const file of ['domains.csv', 'domains.jsonl', 'domains.parquet', 'report.html']) expect([file, statSync(dir.path(`out/${file}`)).mode & 0o777]).toEqual([file, mode]);
    }
    using dir = workdir();
    handMadeDatabase(dir.path('hand.sqlite'));
    writeFileSync(dir.path('shared.csv'), '', { mode: 0o640 });
    await exportReport({ database: dir.path('hand.sqlite'), report: 'domains', out: dir.path('shared.csv') });
    expect(statSync(dir.path('shared.csv')).mode & 0o777).toBe(0o640);
    expect(readFileSync(dir.path('shared.csv'), 'utf8')).toContain('x.com');
  });
});
