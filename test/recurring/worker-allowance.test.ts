// A scheduled pipeline's run stopped by its allowance, continued by the worker (docs/schedules.md#allowances-and-the-worker):
// the worker's loop in virtual time, each occurrence's run a real run() against the simulator over real sockets, the
// SQLite store's clock the virtual one (test/recurring/virtual-worker.ts). Occurrences in the spent period send nothing
// and say why; the first in the next period takes the same run up where it stopped: no page fetched twice, none
// missing. With `spread: 'even'`, each occurrence spends its share and the next takes up the same run.
import { describe, expect, it } from 'vitest';
import { normalize, searchPages, toSqlite } from '../../src/index.ts';
import { virtualClock } from '../../src/schedule/clock.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';
import { virtualWorker } from './virtual-worker.ts';

const SEARCH = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 2 };
const iso = (at: number) => new Date(at).toISOString();

describe('the worker continues a run stopped by its allowance (virtual time, over real sockets)', () => {
  it('skips the occurrences of the spent day, saying why, and takes the same run up at the next day’s first: page-exact', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const start = Date.parse('2026-11-27T00:00:01.000Z');
    const clock = virtualClock(0, start);
    const definition = {
      name: 'four-a-day',
      source: searchPages(SEARCH),
      stages: [normalize()],
      sinks: [toSqlite({ path: dir.path('out.sqlite'), table: 'results' })],
      schedule: { cron: '0 */6 * * *', timezone: 'UTC' },
      allowance: { credits: 5, per: 'day' as const },
      rate: { concurrency: 1 },
    };
    const options = { baseUrl: sim.url, apiKey: TEST_KEY, env: {} };
    // A first worker, stopped after the day's second occurrence; another started an hour later leaves the run stopped
    // by its allowance to the next occurrence (it does not take it up as it starts, as it would an interrupted one).
    {
      await using early = await virtualWorker(clock, definition, options);
      await early.until(Date.parse('2026-11-27T13:00:00.000Z'));
      await early.stop();
      expect(early.runs.map((each) => [iso(each.at), each.summary?.status])).toEqual([['2026-11-27T06:00:00.000Z', 'allowance']]);
    }
    await using worker = await virtualWorker(clock, definition, options);
    await worker.until(Date.parse('2026-11-29T03:00:00.000Z'));
    await worker.stop();
    expect(worker.news).toContainEqual(expect.objectContaining({ message: expect.stringMatching(/^run \S+ ended allowance: the next occurrence with credits to spend takes it up again$/) }));
    const [first, ...later] = worker.runs.map((each) => each.summary);
    expect(worker.runs.map((each) => [iso(each.at), each.take.kind, each.summary?.status, each.summary?.pages.fetched])).toEqual([
      ['2026-11-28T00:00:00.000Z', 'start', 'allowance', 10],
      ['2026-11-29T00:00:00.000Z', 'start', 'completed', 12],
    ]);
    expect(later.every((summary) => summary?.runId === first?.runId)).toBe(true);
    expect(first?.resumeAt).toBe('2026-11-29T00:00:00.000Z');

    // Each occurrence's fate: the spent day's skipped, saying why and until when; the next day's first resumed the run.
    const occurrences = (await worker.store.occurrences('four-a-day')).reverse().map((row) => [row.dueAt, row.outcome, row.runId, row.note]);
    const waiting = (day: string, opens: string) =>
      `run ${first?.runId} stopped on its keys' allowance (key "default" spent its allowance for ${day}): nothing is sent before ${opens}, when the first occurrence takes it up again`;
    expect(occurrences).toEqual([
      ['2026-11-27T06:00:00.000Z', 'started', first?.runId, null],
      ['2026-11-27T12:00:00.000Z', 'skipped', null, waiting('2026-11-27', '2026-11-28T00:00:00.000Z')],
      ['2026-11-27T18:00:00.000Z', 'skipped', null, waiting('2026-11-27', '2026-11-28T00:00:00.000Z')],
      ['2026-11-28T00:00:00.000Z', 'resumed', first?.runId, `run ${first?.runId} was unfinished: resumed`],
      ['2026-11-28T06:00:00.000Z', 'skipped', null, waiting('2026-11-28', '2026-11-29T00:00:00.000Z')],
      ['2026-11-28T12:00:00.000Z', 'skipped', null, waiting('2026-11-28', '2026-11-29T00:00:00.000Z')],
      ['2026-11-28T18:00:00.000Z', 'skipped', null, waiting('2026-11-28', '2026-11-29T00:00:00.000Z')],
      ['2026-11-29T00:00:00.000Z', 'resumed', first?.runId, `run ${first?.runId} was unfinished: resumed`],
    ]);

    // Page-exact: every page of the plan paid once — the simulator's count, its log, the results and the ledger agree.
    const paid = sim.log().filter((entry) => entry.status === 200);
    expect(sim.stats().requests).toBe(12);
    expect(sim.stats().credits.main?.debited).toBe(12);
    expect(new Set(paid.map((entry) => `${entry.query}`)).size).toBe(12);
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT count(DISTINCT query || country || page) AS pages FROM results')).toEqual([{ pages: 12 }]);
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT period, sum(credits) AS credits FROM spend GROUP BY period ORDER BY period')).toEqual([
      { period: '2026-11-27', credits: 5 },
      { period: '2026-11-28', credits: 5 },
      { period: '2026-11-29', credits: 2 },
    ]);
  });
});

describe("the worker spreads a day's allowance over an hourly schedule (virtual time, over real sockets)", () => {
  it("New York's 25-hour day: each of its 25 occurrences takes its share of what is left, the same run throughout, the day's total the allowance", async () => {
    await using sim = await simulator();
    using dir = workdir();
    // Midnight in New York on 1 November 2026 is 04:00 UTC; the clocks go back at 02:00, and the next midnight is 05:00 UTC.
    const clock = virtualClock(0, Date.parse('2026-11-01T03:59:30.000Z'));
    await using worker = await virtualWorker(
      clock,
      {
        name: 'hourly',
        source: searchPages({ queries: Array.from({ length: 40 }, (_, i) => `q${i}`), countries: ['us'], maxPages: 5 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('out.sqlite'), table: 'results' })],
        schedule: { cron: '0 * * * *', timezone: 'America/New_York' },
        allowance: { credits: 110, per: 'day', timezone: 'America/New_York', spread: 'even' },
        rate: { concurrency: 2 },
      },
      { baseUrl: sim.url, apiKey: TEST_KEY, env: {} },
    );
    await worker.until(Date.parse('2026-11-02T04:30:00.000Z'));
    await worker.stop();
    const runs = worker.runs.map((each) => ({
      at: iso(each.at),
      status: each.summary?.status,
      fetched: each.summary?.pages.fetched,
      share: Number(/share is (\d+) credit/.exec(each.events.flatMap((event) => (event.type === 'start' ? event.notes : [])).join(' '))?.[1]),
    }));
    expect(runs).toHaveLength(25);
    expect(runs[0]?.at).toBe('2026-11-01T04:00:00.000Z');
    expect(runs.at(-1)?.at).toBe('2026-11-02T04:00:00.000Z');
    // 110 over 25: 4 each, and one more for each of the last 10 — the last takes what is left.
    expect(runs.map((each) => each.share)).toEqual([...Array(15).fill(4), ...Array(10).fill(5)]);
    expect(runs.map((each) => each.fetched)).toEqual(runs.map((_, i) => runs.slice(0, i + 1).reduce((sum, each) => sum + each.share, 0)));
    expect(runs.every((each) => each.status === 'allowance')).toBe(true);
    expect(new Set(worker.runs.map((each) => each.summary?.runId)).size).toBe(1);
    // Page-exact, and the day's total the allowance.
    const paid = sim.log().filter((entry) => entry.status === 200);
    expect(sim.stats().credits.main?.debited).toBe(110);
    expect(new Set(paid.map((entry) => entry.query)).size).toBe(110);
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT period, sum(credits) AS credits FROM spend GROUP BY period')).toEqual([{ period: '2026-11-01', credits: 110 }]);
  });
});
