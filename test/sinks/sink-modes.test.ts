import { describe, expect, it } from 'vitest';
import { dedupe, normalize, searchPages, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const pipeline = (path: string, mode: 'append' | 'replace' | 'upsert', queries = ['espresso', 'kettle']) => ({
  name: `modes-${mode}`,
  source: searchPages({ queries, countries: ['us'], maxPages: 2 }),
  stages: [normalize(), dedupe()],
  sinks: [toSqlite({ path, mode })],
});

describe('SQLite sink modes', () => {
  it('append keeps every run’s rows', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const first = await runOn(sim, pipeline(dir.path('a.sqlite'), 'append'));
    const second = await runOn(sim, pipeline(dir.path('a.sqlite'), 'append'));
    const perRun = sqliteRows(dir.path('a.sqlite'), 'SELECT run_id, COUNT(*) AS n FROM results GROUP BY run_id ORDER BY MIN(rowid)');
    expect(perRun).toEqual([
      { run_id: first.runId, n: first.items.written },
      { run_id: second.runId, n: second.items.written },
    ]);
  });

  it('replace keeps only the latest finished run: an interrupted run does not wipe the last good one', async () => {
    await using sim = await simulator({ latencyMs: 5 });
    using dir = workdir();
    const path = dir.path('r.sqlite');
    const first = await runOn(sim, pipeline(path, 'replace'));
    const stop = new AbortController();
    const interrupted = await runOn(sim, pipeline(path, 'replace'), { signal: stop.signal, onEvent: (e) => e.type === 'page' && stop.abort() });
    expect(interrupted.status).toBe('interrupted');
    const runsMeanwhile = sqliteRows(path, 'SELECT DISTINCT run_id FROM results ORDER BY run_id').map((r) => r.run_id);
    expect(runsMeanwhile).toEqual([first.runId, interrupted.runId].sort());
    const resumed = await runOn(sim, pipeline(path, 'replace'));
    expect(resumed).toMatchObject({ runId: interrupted.runId, status: 'completed' });
    expect(sqliteRows(path, 'SELECT DISTINCT run_id FROM results')).toEqual([{ run_id: resumed.runId }]);
    expect(sqliteRows(path, 'SELECT COUNT(*) AS n FROM results')).toEqual([{ n: resumed.items.written }]);
  });

  it('upsert keeps one row per (query, country, lang, dedupe key) with first and last seen; keyless items are appended', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const path = dir.path('u.sqlite');
    sim.inject({ fault: 'status', status: 200, body: { data: [{ title: 'no url at all' }, { title: 'kept', url: 'https://k.example/' }] }, match: { q: 'keyless' } });
    const first = await runOn(sim, pipeline(path, 'upsert', ['espresso', 'keyless']));
    const second = await runOn(sim, pipeline(path, 'upsert', ['espresso', 'keyless']));
    const keyed = sqliteRows(path, 'SELECT COUNT(*) AS n, COUNT(DISTINCT query || country || lang || dedupe_key) AS keys FROM results WHERE dedupe_key IS NOT NULL');
    expect(keyed[0]?.n).toBe(keyed[0]?.keys);
    const row = sqliteRows(path, "SELECT run_id, first_run_id, first_seen, last_seen, fetched_at FROM results WHERE query = 'espresso' LIMIT 1")[0];
    expect(row).toMatchObject({ run_id: second.runId, first_run_id: first.runId });
    expect(String(row?.first_seen) < String(row?.last_seen)).toBe(true);
    expect(row?.last_seen).toBe(row?.fetched_at);
    // The item without a URL (hence without a key) came twice and is there twice; the keyed one once.
    expect(sqliteRows(path, "SELECT title, COUNT(*) AS n FROM results WHERE query = 'keyless' GROUP BY title ORDER BY title")).toEqual([
      { title: 'kept', n: 1 },
      { title: 'no url at all', n: 2 },
    ]);
  });

  it('upsert refuses a table written in append mode, saying why', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const path = dir.path('x.sqlite');
    await runOn(sim, { ...pipeline(path, 'append'), name: 'same' });
    await runOn(sim, { ...pipeline(path, 'append'), name: 'same' });
    const error = await runOn(sim, { ...pipeline(path, 'upsert'), name: 'same' }).catch((e: unknown) => e);
    expect(String(error)).toContain('it lacks first_seen, last_seen, first_run_id');
  });
});
