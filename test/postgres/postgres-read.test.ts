import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { exportReport } from '../../src/analytics/index.ts';
import { normalize, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { readReportData } from '../../src/report/data.ts';
import { openReader } from '../../src/analytics/reader.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, testDatabase } from './pg.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

describePostgres('export, report and runs read PostgreSQL as they read SQLite', () => {
  it('every analytics report exports the same bytes from both (CSV and JSON Lines); items the same rows', async () => {
    await using sim = await simulator({ seed: 12, driftEveryMs: 1 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const pipeline = {
        name: 'both',
        source: searchPages({ queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('both.sqlite') }), toPostgres({ url: db.url, table: 'results' })],
      };
      await runOn(sim, pipeline);
      await runOn(sim, pipeline);
      for (const report of ['rankings', 'domains', 'overlap', 'changes'] as const) {
        for (const format of ['csv', 'jsonl'] as const) {
          const fromSqlite = await exportReport({ database: dir.path('both.sqlite'), report, format, out: dir.path(`s-${report}.${format}`) });
          const fromPostgres = await exportReport({ database: db.url, report, format, out: dir.path(`p-${report}.${format}`) });
          expect(fromPostgres.rows, report).toBe(fromSqlite.rows);
          expect(fromPostgres.rows, report).toBeGreaterThan(0);
          expect(readFileSync(dir.path(`p-${report}.${format}`), 'utf8'), `${report}.${format}`).toEqual(readFileSync(dir.path(`s-${report}.${format}`), 'utf8'));
        }
      }
      // Items: the same rows (PostgreSQL keeps no insertion order, and jsonb its own key order in raw).
      const items = async (database: string, name: string) => {
        await exportReport({ database, report: 'items', format: 'jsonl', out: dir.path(name) });
        return readFileSync(dir.path(name), 'utf8')
          .trim()
          .split('\n')
          .map((line) => {
            const { raw, ...row } = JSON.parse(line) as Record<string, unknown>;
            return JSON.stringify({ ...row, raw: typeof raw === 'string' ? Object.keys(JSON.parse(raw) as object).sort() : raw });
          })
          .sort();
      };
      expect(await items(db.url, 'p-items.jsonl')).toEqual(await items(dir.path('both.sqlite'), 's-items.jsonl'));
      // The report reads the same data from both (the runs and their spend, by run and by key, live in the SQLite state
      // store only here).
      const read = async (database: string) => {
        const reader = await openReader(database);
        try {
          const { database: _label, runs: _runs, keySpend: _keySpend, ...data } = await readReportData(reader, { table: 'results', maxQueries: 3, maxLines: 6, maxRuns: 50 });
          return data;
        } finally {
          await reader.close();
        }
      };
      const fromPostgres = await read(db.url);
      expect(fromPostgres.histories.length).toBeGreaterThan(0);
      expect(fromPostgres).toEqual(await read(dir.path('both.sqlite')));
    } finally {
      await db.drop();
    }
  });

  it('from the command line: export, report and runs take a postgres:// URL (or --database-url, or postgres: for DATABASE_URL), never one with a password', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { sinks: [{ type: 'postgres', table: 'results', url: db.url }] });
      const run = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(run.code, run.stderr).toBe(0);
      const { runId } = JSON.parse(run.stdout) as { runId: string };

      const exported = await cli(['export', db.url, '--report', 'spend', '--format', 'jsonl'], { cwd: dir.dir });
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { run_id: string }).run_id)).toContain(runId);
      const byEnv = await cli(['export', 'postgres:', '--report', 'rankings'], { cwd: dir.dir, env: { DATABASE_URL: db.url } });
      expect(byEnv.code, byEnv.stderr).toBe(0);
      expect(byEnv.stdout.split('\n')[0]).toMatch(/^\uFEFF?query,country,lang,rank/);

      const byFlag = await cli(['export', '--database-url', db.url, '--report', 'rankings'], { cwd: dir.dir });
      expect(byFlag.code, byFlag.stderr).toBe(0);
      expect(byFlag.stdout).toBe(byEnv.stdout);

      const report = await cli(['report', db.url, '--out', 'report.html'], { cwd: dir.dir });
      expect(report.code, report.stderr).toBe(0);
      expect(readFileSync(dir.path('report.html'), 'utf8')).toContain('data-chart=');

      const runs = await cli(['runs', db.url, '--json'], { cwd: dir.dir });
      expect(runs.code, runs.stderr).toBe(0);
      expect((JSON.parse(runs.stdout) as { runId: string; status: string })).toMatchObject({ runId, status: 'completed' });
      expect((await cli(['runs', '--database-url', db.url, '--json'], { cwd: dir.dir })).stdout).toBe(runs.stdout);
      const ofPipeline = await cli(['runs', file], { cwd: dir.dir });
      expect(ofPipeline.stdout).toContain(runId);

      const withPassword = await cli(['export', db.url.replace('postgres@', 'postgres:hunter2@'), '--report', 'rankings'], { cwd: dir.dir });
      expect(withPassword.code).toBe(2);
      expect(withPassword.stderr).toMatch(/must not carry a password/);
      expect(withPassword.stderr).not.toContain('hunter2');
    } finally {
      await db.drop();
    }
  });
});
