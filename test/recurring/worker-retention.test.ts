// A worker applies its pipeline's retention after each run (docs/schedules.md#retention): a scheduled pipeline keeping
// its last run keeps one, however many occurrences ran, and says what each prune removed. In real time against the
// simulator; every wait is for what can be observed (a line printed, rows in the state store), within a bound.
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { config, envFor, startCli } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

/** Rows of the SQLite state store, read beside the worker (none while the file or its table does not exist yet). */
function rows(path: string, query: string): Record<string, unknown>[] {
  if (!existsSync(path)) return [];
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'runs'`).get() === undefined ? [] : (db.prepare(query).all() as Record<string, unknown>[]);
  } finally {
    db.close();
  }
}

describe('webdata-etl worker with a retention', () => {
  it("prunes after each run: three occurrences' runs, the last one's records kept, each prune said on stderr", async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(
      dir.dir,
      { name: 'pruned', schedule: { cron: '*/2 * * * * *' }, retention: { runs: 1 }, sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }] },
      { queries: ['espresso'], countries: ['us'], maxPages: 1 },
    );
    const state = dir.path('out/results.sqlite');
    const worker = startCli(['worker', file], { cwd: dir.dir, env: envFor(sim.url) });
    // Three runs ended, and the prunes after the second and third said so.
    await worker.whileRunning(
      new Promise<void>((resolve, reject) => {
        const deadline = Date.now() + 90_000;
        const poll = setInterval(() => {
          const { stdout, stderr } = worker.output();
          if (stdout.trim().split('\n').filter(Boolean).length >= 3 && (stderr.match(/retention: removed 1 run's records/g) ?? []).length >= 2) {
            clearInterval(poll);
            resolve();
          } else if (Date.now() > deadline) {
            clearInterval(poll);
            reject(new Error(`gave up waiting for three runs and two prunes:\n${stderr}`));
          }
        }, 100);
      }),
    );
    worker.child.kill('SIGTERM');
    const done = await worker.done;
    expect(done.code, done.stderr).toBe(0);
    const summaries = done.stdout.trim().split('\n').map((line) => JSON.parse(line) as { runId: string; status: string });
    expect(summaries.length).toBeGreaterThanOrEqual(3);
    expect(done.stderr).toMatch(/pruned: retention: removed 1 run's records \(series 1, run_sinks 1, occurrences 1, runs 1\)/);
    // The last run's records, and at most one more: a run the signal interrupted after it.
    const kept = rows(state, 'SELECT run_id FROM runs ORDER BY rowid').map((row) => row.run_id);
    const completed = summaries.filter((summary) => summary.status === 'completed').map((summary) => summary.runId);
    expect(kept).toContain(completed.at(-1));
    expect(kept.length).toBeLessThanOrEqual(2);
    for (const gone of completed.slice(0, -1)) expect(rows(state, `SELECT count(*) AS n FROM series WHERE run_id = '${gone}'`)).toEqual([{ n: 0 }]);
    // The user's rows stay: every run's.
    expect(rows(state, 'SELECT count(DISTINCT run_id) AS n FROM results')[0]?.n).toBe(completed.length);
  }, 120_000);
});
