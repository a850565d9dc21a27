// The report's panel of where the credits went (docs/analytics.md#the-report): credits per day per key from the state's
// webdata_spend, each key's allowance as a line — a daily one against the day's bars, a monthly one against the
// month's running total — and the credits by pipeline and key; after real runs, over an allowance's spend written
// through a store, escaped when the database holds markup, in SQLite and in PostgreSQL.
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createPostgresSpendView } from '../../src/analytics/postgres-views.ts';
import { openReader } from '../../src/analytics/reader.ts';
import { createSpendView } from '../../src/analytics/views.ts';
import { run } from '../../src/index.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { daysEnding, readKeySpend } from '../../src/report/key-spend.ts';
import { renderReport } from '../../src/report/index.ts';
import { monthToDate } from '../../src/report/spend-chart.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import { postgresStateStore } from '../../src/state/postgres/store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { workdir } from '../pipeline-helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';
import { debited, pipelineOf, POOL, poolSimulator, spendRow } from './spend-fixture.ts';

/** The marks of each chart named `chart`, counted from the SVG text, in the page's order. */
function marksOf(html: string, chart: string): Record<string, number>[] {
  return html
    .split(`<svg data-chart="${chart}"`)
    .slice(1)
    .map((svg) => {
      const counts: Record<string, number> = {};
      for (const match of (svg.split('</svg>')[0] ?? '').matchAll(/data-mark="(\w+)"/g)) counts[match[1] as string] = (counts[match[1] as string] ?? 0) + 1;
      return counts;
    });
}

/** The panel's section of the page. */
const panel = (html: string) => html.split('<h2>Credits per day per key</h2>')[1]?.split('</section>')[0] ?? '';

const DAILY = { credits: 10, per: 'day', timezone: 'Europe/Berlin' } as const;
const MONTHLY = { credits: 50, per: 'month', timezone: 'UTC' } as const;

/**
 * A daily allowance (`daily`, spent by alpha), a monthly one (`monthly`, spent by beta across a month's end), and spend
 * of a key and a pipeline whose names are markup (a tampered database, or a stage of one's own writing them).
 */
async function spendWithAllowances(store: StateStore): Promise<void> {
  await store.declareAllowance({ fingerprint: 'fp-daily', label: 'daily', pipeline: 'alpha', allowance: DAILY });
  await store.declareAllowance({ fingerprint: 'fp-monthly', label: 'monthly', pipeline: 'beta', allowance: MONTHLY });
  const daily = { fingerprint: 'fp-daily', label: 'daily', period: null, holder: null };
  const monthly = { fingerprint: 'fp-monthly', label: 'monthly', period: null, holder: null };
  await store.spend([
    spendRow('run-a', 'alpha', daily, 4, '2026-11-29T10:00:00.000Z'),
    spendRow('run-a', 'alpha', daily, 12, '2026-11-30T10:00:00.000Z'),
    spendRow('run-b', 'beta', monthly, 20, '2026-11-29T10:00:00.000Z'),
    spendRow('run-b', 'beta', monthly, 25, '2026-11-30T10:00:00.000Z'),
    spendRow('run-b', 'beta', monthly, 7, '2026-12-01T10:00:00.000Z'),
    spendRow('run-x', '"><script>alert(1)</script>', { fingerprint: 'fp-evil', label: '<img src=x onerror=alert(1)>', period: null, holder: null }, 1, '2026-12-01T10:00:00.000Z'),
  ]);
}

/** What every store's report must show of `spendWithAllowances`. */
function showsAllowances(html: string): void {
  const section = panel(html);
  expect(section).not.toBe('');
  // Three keys, the month up to 1 December each: a bar a day; the daily allowance a line; the monthly one a line and
  // the month's running total; no allowance, no line.
  expect(marksOf(section, 'key-spend')).toEqual([{ bar: 31, cumulative: 1, allowance: 1 }, { bar: 31, allowance: 1 }, { bar: 31 }]);
  expect(section).toContain('monthly — allowance 50 credits a month (UTC)');
  expect(section).toContain('daily — allowance 10 credits a day (Europe/Berlin)');
  // The running total starts again on the 1st: 20, 45, then 7, a line of its own.
  expect(section.match(/data-mark="cumulative" d="([^"]*)"/)?.[1]?.match(/M/g)).toHaveLength(2);
  expect(section).toContain('monthly, 2026-11-30: 25 credits (45 this month)');
  expect(section).toContain('monthly, 2026-12-01: 7 credits (7 this month)');
  // Markup in a label or a pipeline's name is text.
  expect(section).toContain('&lt;img src=x onerror=alert(1)&gt;');
  expect(section).toContain('&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;');
  expect(html).not.toMatch(/<img|<script/i);
}

describe('the report’s credits per day per key', () => {
  it('a month’s days, a running total that starts again on the 1st', () => {
    expect(daysEnding('2026-03-01', 3)).toEqual(['2026-02-27', '2026-02-28', '2026-03-01']);
    expect(daysEnding('2028-03-01', 2)).toEqual(['2028-02-29', '2028-03-01']);
    expect(daysEnding('<b>', 3)).toEqual([]);
    expect(monthToDate(['2026-11-29', '2026-11-30', '2026-12-01', '2026-12-02'], [1, 2, 3, 4])).toEqual([1, 3, 3, 7]);
  });

  it("after two pipelines' runs with a pool of two keys: a chart per key, its credits the simulator's, by pipeline too", async () => {
    await using sim = await poolSimulator();
    using dir = workdir();
    const state = { path: dir.path('state.sqlite') };
    for (const [name, queries] of [
      ['alpha', ['espresso', 'kettle']],
      ['beta', ['grinder', 'scale']],
    ] as const) {
      expect((await run(pipelineOf(name, dir.dir, state, [...queries]), { baseUrl: sim.url, env: { WEBDATA_API_KEYS: POOL } })).status).toBe('completed');
    }
    const reader = await openReader(state.path);
    try {
      const spend = await readKeySpend(reader);
      const total = (label: string) => spend?.keys.find((key) => key.label === label)?.credits.reduce((sum, n) => sum + n, 0);
      expect(total('north')).toBe(debited(sim).north);
      expect(total('south')).toBe(debited(sim).south);
      expect(new Set(spend?.pipelines.map((line) => `${line.pipeline} ${line.key}`))).toEqual(new Set(['alpha north', 'alpha south', 'beta north', 'beta south']));
    } finally {
      await reader.close();
    }
    const html = await renderReport({ database: state.path });
    // No allowance: bars, no line.
    expect(marksOf(panel(html), 'key-spend')).toEqual([{ bar: 31 }, { bar: 31 }]);
    expect(panel(html)).toContain('<td>alpha</td><td>north</td>');
  });

  it('SQLite: a daily allowance as a line, a monthly one against the running total; markup escaped', async () => {
    using dir = workdir();
    const db = new Database(dir.path('state.sqlite'));
    const store = sqliteStateStore(db);
    createSpendView(db);
    await spendWithAllowances(store);
    db.close();
    showsAllowances(await renderReport({ database: dir.path('state.sqlite') }));
  });

  it('a database with no webdata_spend (no run of this webdata-etl opened it) has no panel', async () => {
    using dir = workdir();
    new Database(dir.path('old.sqlite')).exec('CREATE TABLE spend (run_id TEXT)').close();
    expect(panel(await renderReport({ database: dir.path('old.sqlite') }))).toBe('');
  });
});

describePostgres('the report’s credits per day per key (PostgreSQL)', () => {
  it('the same charts as SQLite’s, from the state’s schema', async () => {
    const db = await testDatabase();
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      await spendWithAllowances(await postgresStateStore(pool, postgresTarget(db.url), { schema: 'webdata', pipeline: 'alpha' }));
      await createPostgresSpendView(pool, 'webdata');
      showsAllowances(await renderReport({ database: db.url }));
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
