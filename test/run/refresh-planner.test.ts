// The refresh planner in runs (issue 42, item 3 wired in, and item 4): `refresh: { priority: 'changes' }` plans each new
// run under its budget in pages from each series' history in the state store; the series it does not fetch are
// recorded `skipped` (store, outcomes, summary) and never requested. Over real sockets against the simulator on its
// days: what each run paid is what the simulator counted, and which series move is its ground truth.
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { normalize, run, searchPages, toSqlite, type PipelineDefinition, type RunSummary } from '../../src/index.ts';
import { exitCodeFor } from '../../src/run/exit-codes.ts';
import { checkResumeTerms } from '../../src/run/run-terms.ts';
import type { RunRecord } from '../../src/state/interfaces.ts';
import { virtualClock } from '../../src/schedule/clock.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { SKIPPED } from '../../src/sinks/series-outcomes.ts';
import { expectRefused, simulator, TEST_KEY, thrown } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { cli, config, envFor } from '../cli-helpers.ts';

const SEED = 23;
const KEYWORDS = 40;
const queries = Array.from({ length: KEYWORDS }, (_, i) => `kw ${i + 1}`);
const seriesOf = (q: string) => ({ q, country: 'us', lang: 'en' });

/** Requests the simulator answered for each query since `from` (an index into its log). */
function pagesByQuery(sim: Simulator, from = 0): Map<string, number> {
  const counts = new Map<string, number>();
  for (const entry of sim.log().slice(from)) {
    const q = new URLSearchParams(entry.query).get('q');
    if (q !== null && entry.status === 200) counts.set(q, (counts.get(q) ?? 0) + 1);
  }
  return counts;
}

/** A queries file whose `site` column tracks, for each keyword, the domain at a rank of 1 to 30 on day 0. */
function keywordsFile(sim: Simulator, path: string): void {
  const lines = queries.map((q, i) => {
    const ranking = sim.ranking(seriesOf(q), 0);
    const result = ranking[(i * 7) % Math.min(30, ranking.length)] as { domain: string };
    return `${q},${result.domain}`;
  });
  writeFileSync(path, `keyword,site\n${lines.join('\n')}\n`);
}

function pipeline(dir: { path(name: string): string }, extra: Record<string, unknown> = {}): PipelineDefinition {
  return {
    name: 'planned',
    source: searchPages({ queriesFile: dir.path('keywords.csv'), countries: ['us'], langs: ['en'], maxPages: 5 }),
    stages: [normalize()],
    sinks: [toSqlite({ path: dir.path('out.sqlite') })],
    track: { column: 'site' },
    refresh: { depth: 'until-found', priority: 'changes' },
    ...extra,
  } as PipelineDefinition;
}

/** Each run of the pipeline, oldest first: every series' status and reason in it, from the state store. */
function seriesRows(path: string, runId: string): { query: string; status: string; reason: string | null; pages: number }[] {
  return sqliteRows(path, `SELECT query, status, reason, pages FROM series WHERE run_id = '${runId}' ORDER BY query`) as never;
}

const HISTORY_DAYS = 8;

/** The queries whose tracked rank moved (by 3 or more, or in or out of the depth searched) in the first `runs` runs. */
function movedQueries(path: string, runs: number): Set<string> {
  const rows = sqliteRows(path, 'SELECT query, rank, searched FROM results_tracked ORDER BY query, run_id') as { query: string; rank: number | null; searched: number }[];
  const byQuery = new Map<string, { rank: number | null; searched: number }[]>();
  for (const row of rows) byQuery.set(row.query, [...(byQuery.get(row.query) ?? []), row]);
  const moved = new Set<string>();
  for (const [query, ranks] of byQuery) {
    const seen = ranks.slice(0, runs);
    for (let i = 1; i < seen.length; i++) {
      const [a, b] = [seen[i - 1], seen[i]] as [{ rank: number | null; searched: number }, { rank: number | null; searched: number }];
      if (a.rank !== null && b.rank !== null ? Math.abs(a.rank - b.rank) >= 3 : a.rank !== b.rank) moved.add(query);
    }
  }
  return moved;
}

const sum = (values: Iterable<number>) => [...values].reduce((a, b) => a + b, 0);
const mean = (values: readonly number[]) => sum(values) / Math.max(1, values.length);

describe('the refresh planner in a run', () => {
  it('after full runs, spends a budget on the volatile series and skips the still ones: skipped in the store, outcomes and summary, completed, exit 0', async () => {
    await using sim = await simulator({ seed: SEED, day: 0 });
    using dir = workdir();
    keywordsFile(sim, dir.path('keywords.csv'));
    // Days with no budget: every series fetched (the plan says so), its history learned.
    let full: RunSummary | undefined;
    for (let day = 0; day < HISTORY_DAYS; day++) {
      full = await runOn(sim, pipeline(dir));
      expect(full.series.skipped).toBe(0);
      expect(full.refresh).toMatchObject({ budgetPages: null, skipped: {}, promiseBroken: 0 });
      sim.advanceDay();
    }
    const fullPages = full?.pages.fetched as number;
    const budget = Math.floor(fullPages * 0.4);
    const from = sim.log().length;
    const planned = await runOn(sim, { ...pipeline(dir), budget: { maxCredits: budget } });

    // Never past the budget, counted by the simulator; what the plan skipped was never asked for.
    const paid = pagesByQuery(sim, from);
    expect(sum(paid.values())).toBeLessThanOrEqual(budget);
    expect(planned.status).toBe('completed');
    expect(exitCodeFor({ summary: planned })).toBe(0);
    const rows = seriesRows(dir.path('out.sqlite'), planned.runId);
    const skipped = rows.filter((row) => row.reason === SKIPPED);
    expect(skipped.length).toBeGreaterThan(0);
    expect(planned.series.skipped).toBe(skipped.length);
    for (const row of skipped) expect([row.status, row.pages, paid.get(row.query)]).toEqual(['ended', 0, undefined]);
    expect(planned.series.completed + skipped.length).toBe(KEYWORDS);
    expect(planned.series.stopped).toEqual({});
    // The plan explained: its budget in pages, what it expected and spent, its choices by reason.
    const refresh = planned.refresh;
    expect(refresh).toMatchObject({ priority: 'changes', budgetPages: budget, spentPages: sum(paid.values()), maxAgeRuns: 7, promiseBroken: 0, historyRuns: HISTORY_DAYS });
    expect(sum(Object.values(refresh?.skipped ?? {}))).toBe(skipped.length);
    expect(sum(Object.values(refresh?.chosen ?? {}))).toBe(KEYWORDS - skipped.length);
    // The series whose tracked ranks moved in their history are fetched; those skipped never moved (still series).
    const moved = movedQueries(dir.path('out.sqlite'), HISTORY_DAYS);
    expect(moved.size).toBeGreaterThan(0);
    for (const row of rows) if (moved.has(row.query)) expect([row.query, row.reason]).not.toEqual([row.query, SKIPPED]);
    // And on the whole they are the volatile ones, by the simulator's own volatility.
    const volatility = (q: string) => sim.volatility(seriesOf(q));
    expect(mean(rows.filter((row) => moved.has(row.query)).map((row) => volatility(row.query)))).toBeGreaterThan(mean(skipped.map((row) => volatility(row.query))));
    // Outcomes: skipped, not complete; no rows and no tracked ranks of them in that run.
    const outcomes = sqliteRows(dir.path('out.sqlite'), `SELECT query, complete, reason FROM results_outcomes WHERE run_id = '${planned.runId}' AND reason = 'skipped' ORDER BY query`);
    expect(outcomes).toEqual(skipped.map((row) => ({ query: row.query, complete: 0, reason: 'skipped' })));
    const skippedQueries = skipped.map((row) => `'${row.query}'`).join(', ');
    expect(sqliteRows(dir.path('out.sqlite'), `SELECT COUNT(*) AS n FROM results WHERE run_id = '${planned.runId}' AND query IN (${skippedQueries})`)).toEqual([{ n: 0 }]);
    expect(sqliteRows(dir.path('out.sqlite'), `SELECT COUNT(*) AS n FROM results_tracked WHERE run_id = '${planned.runId}' AND query IN (${skippedQueries})`)).toEqual([{ n: 0 }]);
    // The runs table keeps it, with the plan it opened with in its terms.
    const db = new Database(dir.path('out.sqlite'));
    const record = (await sqliteStateStore(db).runs('planned')).at(-1);
    expect(record?.summary).toMatchObject({ refresh: { budgetPages: budget }, series: { skipped: skipped.length } });
    expect(record?.terms).toMatchObject({ refresh: { budgetPages: budget, priority: 'changes' } });
    db.close();
  });
});

describe('the plan across runs', () => {
  it('never leaves a series unfetched for more than maxAgeRuns runs, over 10 runs on the simulator\'s days', async () => {
    await using sim = await simulator({ seed: SEED, day: 0 });
    using dir = workdir();
    keywordsFile(sim, dir.path('keywords.csv'));
    const maxAgeRuns = 2;
    const first = await runOn(sim, pipeline(dir, { refresh: { depth: 'until-found', priority: 'changes', maxAgeRuns } }));
    const budget = Math.ceil(first.pages.fetched * 0.45);
    const summaries: RunSummary[] = [first];
    for (let day = 1; day <= 10; day++) {
      sim.advanceDay();
      const from = sim.log().length;
      const summary = await runOn(sim, { ...pipeline(dir, { refresh: { depth: 'until-found', priority: 'changes', maxAgeRuns } }), budget: { maxCredits: budget } });
      expect(sum(pagesByQuery(sim, from).values())).toBeLessThanOrEqual(budget);
      expect(summary.refresh).toMatchObject({ maxAgeRuns, promiseBroken: 0 });
      summaries.push(summary);
    }
    // Skips in a row, per series, from the state store: never more than maxAgeRuns.
    const streaks = new Map<string, number>();
    let longest = 0;
    for (const summary of summaries) {
      for (const row of seriesRows(dir.path('out.sqlite'), summary.runId)) {
        const streak = row.reason === SKIPPED ? (streaks.get(row.query) ?? 0) + 1 : 0;
        streaks.set(row.query, streak);
        longest = Math.max(longest, streak);
      }
    }
    expect(longest).toBe(maxAgeRuns);
    // The promise decided some choices: series fetched because they were overdue.
    expect(summaries.some((summary) => (summary.refresh?.chosen.overdue ?? 0) > 0)).toBe(true);
  });

  it('re-plans as series end: fetches cheaper than expected leave pages for series first skipped', async () => {
    await using sim = await simulator({ seed: SEED, day: 0 });
    using dir = workdir();
    keywordsFile(sim, dir.path('keywords.csv'));
    // A first run at full depth: each series' expected cost is its full depth, where until found it takes 1 to 3 pages.
    await runOn(sim, pipeline(dir, { refresh: { depth: 'full' } }));
    sim.advanceDay();
    const budget = 40;
    const from = sim.log().length;
    const planned = await runOn(sim, { ...pipeline(dir), budget: { maxCredits: budget } });
    const paid = pagesByQuery(sim, from);
    expect(sum(paid.values())).toBeLessThanOrEqual(budget);
    const replanned = planned.refresh?.chosen.replanned ?? 0;
    expect(replanned).toBeGreaterThan(0);
    const firstChosen = sum(Object.values(planned.refresh?.chosen ?? {})) - replanned;
    // The opening plan paid for full depths; the run fetched more series than it chose.
    expect(firstChosen).toBeLessThanOrEqual(budget / 2);
    expect(paid.size).toBe(firstChosen + replanned);
    expect(planned.series.skipped).toBe(KEYWORDS - paid.size);
    expect(seriesRows(dir.path('out.sqlite'), planned.runId).filter((row) => row.reason === SKIPPED).length).toBe(KEYWORDS - paid.size);
    expect(planned.status).toBe('completed');
  });

  it('a resumed run keeps its plan: the series it skipped stay skipped and are never requested', async () => {
    await using sim = await simulator({ seed: SEED, day: 0 });
    using dir = workdir();
    keywordsFile(sim, dir.path('keywords.csv'));
    for (let day = 0; day < 3; day++) {
      await runOn(sim, pipeline(dir));
      sim.advanceDay();
    }
    const definition = { ...pipeline(dir), budget: { maxCredits: 30 }, rate: { concurrency: 1 } } as PipelineDefinition;
    // Stopped once its first series has ended (a signal), then run again: the same run, resumed.
    const stop = new AbortController();
    const stopped = await runOn(sim, definition, { signal: stop.signal, onEvent: (event) => event.type === 'series' && stop.abort() });
    expect(stopped.status).toBe('interrupted');
    const skippedThen = seriesRows(dir.path('out.sqlite'), stopped.runId).filter((row) => row.reason === SKIPPED).map((row) => row.query);
    expect(skippedThen.length).toBeGreaterThan(0);
    const from = sim.log().length;
    const resumed = await runOn(sim, definition);
    expect(resumed.runId).toBe(stopped.runId);
    expect(resumed.status).toBe('completed');
    const skippedNow = seriesRows(dir.path('out.sqlite'), resumed.runId).filter((row) => row.reason === SKIPPED).map((row) => row.query);
    expect(skippedNow).toEqual(skippedThen);
    const paid = pagesByQuery(sim, from);
    for (const query of skippedThen) expect(paid.has(query)).toBe(false);
    expect(paid.size).toBeGreaterThan(0);
    // The plan it opened with is the one it says at the end.
    expect(resumed.refresh).toEqual({ ...stopped.refresh, spentPages: resumed.pages.fetched });
    expect(resumed.series.skipped).toBe(skippedThen.length);
  });
});

describe('the budget in pages', () => {
  it("is a spread allowance's share of the occurrence, or the budget when smaller: the run completes within it", async () => {
    const clock = virtualClock(0, Date.parse('2026-11-01T06:00:00.000Z'));
    await using sim = await simulator({ seed: SEED, day: 0, clock: clock.now, epoch: clock.epoch });
    using dir = workdir();
    keywordsFile(sim, dir.path('keywords.csv'));
    const options = { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, clock };
    // 600 credits a month over November's 30 daily occurrences: 20 today.
    const scheduled = { ...pipeline(dir), schedule: { cron: '0 6 * * *', timezone: 'UTC' }, allowance: { credits: 600, per: 'month', spread: 'even' } } as PipelineDefinition;
    const first = await run(scheduled, options);
    expect(first).toMatchObject({ status: 'completed', refresh: { budgetPages: 20 } });
    expect(first.credits.spent).toBeLessThanOrEqual(20);
    expect(first.series.skipped).toBeGreaterThan(0);
    // The next day, with a budget smaller than the share: the budget.
    await clock.sleep(24 * 3600 * 1000);
    sim.advanceDay();
    const second = await run({ ...scheduled, budget: { maxCredits: 8 } } as PipelineDefinition, options);
    expect(second).toMatchObject({ status: 'completed', refresh: { budgetPages: 8 } });
    expect(second.runId).not.toBe(first.runId);
    expect(second.credits.spent).toBeLessThanOrEqual(8);
  });
});

describe("the plan in a run's terms", () => {
  it('a recorded plan in a shape this version does not know reads as none, and the other terms are still checked on resume', () => {
    const terms = { weights: {}, stages: [], sinks: [], rate: 'unpaced', budget: null, tracking: null };
    const record = (refresh: unknown) => ({ runId: 'r1', pipeline: 'p', terms: { ...terms, refresh } }) as unknown as RunRecord;
    expect(() => checkResumeTerms(record({ priority: 'changes', budgetPages: 'many' }), { ...terms, weights: { '/search': 2 }, refresh: null })).toThrow(/other terms.*credit weights/);
    expect(() => checkResumeTerms(record({ priority: 'changes', budgetPages: 'many' }), { ...terms, refresh: null })).not.toThrow();
  });
});

describe('the command line', () => {
  it('estimate says what the next plan would fetch and why; run and runs say what it did', async () => {
    await using sim = await simulator({ seed: SEED, day: 0 });
    using dir = workdir();
    const search = { queries: queries.slice(0, 12), countries: ['us'], langs: ['en'], maxPages: 5 };
    const domain = (sim.ranking(seriesOf('kw 1'), 0)[2] as { domain: string }).domain;
    const settings = { dedupe: undefined, track: { domains: [domain] }, refresh: { depth: 'until-found', priority: 'changes', maxAgeRuns: 3 } };
    const free = config(dir.dir, settings, search);
    for (let day = 0; day < 3; day++) {
      expect((await cli(['run', free, '--quiet'], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
      sim.advanceDay();
    }
    const budgeted = config(dir.dir, { ...settings, budget: { maxCredits: 15 } }, search);
    const requests = sim.stats().requests;
    const estimated = await cli(['estimate', budgeted, '--json'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(estimated.code).toBe(0);
    const plan = JSON.parse(estimated.stdout).refresh;
    expect(plan).toMatchObject({ priority: 'changes', budgetPages: 15, maxAgeRuns: 3, historyRuns: 3 });
    expect(sum(Object.values(plan.skipped as Record<string, number>))).toBeGreaterThan(0);
    const estimateText = (await cli(['estimate', budgeted], { cwd: dir.dir, env: envFor(sim.url) })).stdout;
    expect(estimateText).toMatch(/^refresh plan \(next run, from the state's history\): budget 15 pages; \d+ series chosen \(.*\); \d+ skipped \(.*\); \d+ pages expected; maxAgeRuns 3 kept$/m);
    // A budget under the worst case is what the plan spends, not where the run stops.
    expect(estimateText).toMatch(/^budget: 15 \(the worst case does not fit: the refresh plan chooses the series it pays for\)$/m);
    expect(sim.stats().requests).toBe(requests);

    const ran = await cli(['run', budgeted], { cwd: dir.dir, env: envFor(sim.url) });
    expect(ran.code).toBe(0);
    const summary = JSON.parse(ran.stdout) as RunSummary;
    // The estimate said what the run then chose: the same history, the same budget.
    expect(summary.refresh).toEqual({ ...plan, spentPages: summary.pages.fetched });
    expect(ran.stderr).toMatch(new RegExp(`series: \\d+ completed, 0 failed, ${summary.series.skipped} skipped by the refresh plan`));
    expect(ran.stderr).toMatch(/refresh plan: budget 15 pages; \d+ series chosen/);
    // Its first lines said what it chose as it opened.
    expect(ran.stderr).toContain(`refresh plan as the run opened: budget 15 pages; ${sum(Object.values(plan.chosen as Record<string, number>))} series chosen`);
    const runs = await cli(['runs', budgeted], { cwd: dir.dir, env: {} });
    expect(runs.stdout).toContain(`(${summary.series.skipped} skipped)`);
    expect(runs.stdout).toMatch(new RegExp(`plan: \\d+ chosen, ${summary.series.skipped} skipped, \\d+/15 pages expected, ${summary.pages.fetched} spent`));
    const lines = (await cli(['runs', budgeted, '--json'], { cwd: dir.dir, env: {} })).stdout.trim().split('\n');
    expect(JSON.parse(lines.at(-1) as string)).toMatchObject({ runId: summary.runId, refresh: summary.refresh });
  });
});

describe('refresh.priority and maxAgeRuns in a config', () => {
  it('are refused naming the field and what is valid, before a request (exit 2)', async () => {
    await using sim = await simulator({ seed: SEED, day: 0 });
    using dir = workdir();
    writeFileSync(dir.path('keywords.csv'), 'keyword,site\nkw 1,example.com\n');
    const refused = async (extra: Record<string, unknown>, field: string, reason: RegExp) => {
      const error = await thrown(() => run(pipeline(dir, extra), { baseUrl: sim.url, apiKey: TEST_KEY, env: {} }));
      expectRefused(error, field, reason);
      expect(exitCodeFor({ error })).toBe(2);
    };
    await refused({ track: undefined, refresh: { priority: 'changes' } }, 'refresh.priority', /needs tracked domains/);
    await refused({ refresh: { priority: 'often' } }, 'refresh.priority', /must be "changes"/);
    await refused({ refresh: { priority: 'changes', maxAgeRuns: 0 } }, 'refresh.maxAgeRuns', /whole number of runs, 1 or more/);
    await refused({ refresh: { priority: 'changes', maxAgeRuns: 2.5 } }, 'refresh.maxAgeRuns', /whole number of runs/);
    await refused({ refresh: { maxAgeRuns: 3 } }, 'refresh.maxAgeRuns', /needs priority: "changes"/);
    // A pruned run's series rows are its history: the planner must still see each series' last fetch.
    await refused({ refresh: { priority: 'changes', maxAgeRuns: 3 }, retention: { runs: 3 } }, 'retention.runs', /at least 4 .*maxAgeRuns 3/);
    await refused({ refresh: { priority: 'changes' }, retention: { runs: 7 } }, 'retention.runs', /at least 8 .*maxAgeRuns 7/);
    expect(sim.stats().requests).toBe(0);
  });
});
