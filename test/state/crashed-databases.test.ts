import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cli, config, envFor, ROOT } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

/**
 * Leaves `path` as a process killed in the middle of a write leaves it when the file is in rollback-journal mode (a
 * new database is, for the moment it takes to switch it to WAL): a hot `-journal` beside it, which the next connection
 * must roll back. A real process, killed with SIGKILL once its uncommitted pages have spilled into the file.
 */
async function killedMidWrite(path: string): Promise<void> {
  const script = `
    const Database = require(${JSON.stringify(`${ROOT}/node_modules/better-sqlite3`)});
    const db = new Database(${JSON.stringify(path)});
    db.pragma('journal_mode = DELETE');
    db.pragma('cache_size = 2');
    db.exec('BEGIN');
    db.exec('CREATE TABLE scratch(x)');
    const insert = db.prepare('INSERT INTO scratch VALUES (?)');
    for (let i = 0; i < 2000; i++) insert.run('x'.repeat(500));
    process.stdout.write('written\\n');
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => child.kill('SIGKILL'));
    child.once('exit', () => resolve());
    child.once('error', reject);
  });
}

describe('a database a killed process left mid-write', () => {
  it('is read by runs, export and report as it was committed (they failed: "attempt to write a readonly database", exit 1)', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const file = config(dir.dir, { sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] });
    expect((await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
    const database = dir.path('out/results.sqlite');
    const rows = sqliteRows(database, 'SELECT count(*) AS n FROM results')[0]?.n;
    expect(rows).toBeGreaterThan(0);

    // As a run killed while it switched a new file to WAL leaves it: rollback mode, a hot journal.
    const db = new Database(database);
    db.pragma('journal_mode = DELETE');
    db.close();
    await killedMidWrite(database);
    expect(existsSync(`${database}-journal`)).toBe(true);

    const runs = await cli(['runs', 'out/results.sqlite', '--json'], { cwd: dir.dir });
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { status: string }).status)).toEqual(['completed']);
    const exported = await cli(['export', 'out/results.sqlite', '--report', 'items', '--format', 'jsonl'], { cwd: dir.dir });
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout.trim().split('\n')).toHaveLength(Number(rows));
    const report = await cli(['report', 'out/results.sqlite', '--out', 'report.html'], { cwd: dir.dir });
    expect(report.code, report.stderr).toBe(0);
    // The killed write was rolled back, as the next writer would have: nothing of it is read, nothing committed lost.
    expect(sqliteRows(database, `SELECT count(*) AS n FROM sqlite_master WHERE name = 'scratch'`)[0]?.n).toBe(0);
    expect(sqliteRows(database, 'SELECT count(*) AS n FROM results')[0]?.n).toBe(rows);
  });
});
