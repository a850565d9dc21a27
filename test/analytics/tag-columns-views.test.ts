// A query file's tag columns in the reports (issue 38, item 23): `category` reached the `items` table but not the
// `rankings` and `changes` views, so a report could not be read by it. Now both views carry the table's tag columns,
// and `export --report rankings|changes` writes them, in SQLite and in PostgreSQL: over real sockets, two runs against
// a drifting simulator (the second with a series failed on purpose), exported by the command line.
import { readFileSync, writeFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { normalize, type PipelineDefinition, searchPages, toPostgres, toSqlite } from '../../src/index.ts';
import { cli } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

/** The query file's tags, by query: `reason` is a column `changes` has of its own, so there it is `tag_reason`. */
const TAGS: Record<string, { category: string; reason: string }> = {
  espresso: { category: 'kitchen', reason: 'morning' },
  'trail shoes': { category: 'outdoor, gear', reason: 'weekend' },
  kettle: { category: 'kitchen', reason: 'tea' },
};
const QUERIES_CSV = 'Category,Query,Reason\r\nkitchen,espresso,morning\r\n"outdoor, gear",trail shoes,weekend\r\nkitchen,kettle,tea\r\n';

/**
 * Two runs of the queries into `sinks`, the second with `kettle` failing: its `changes` row is `failed`. Returns the
 * reports `rankings` and `changes` as `export` writes them from `database` (CSV).
 */
async function twoRunsExported(dir: ReturnType<typeof workdir>, sinks: () => PipelineDefinition['sinks'], database: string) {
  // The rankings move between the runs, and only then: the simulator's clock for drift stands still in a run and is
  // moved on ten drift steps before the second, where (with this seed) one of espresso's results moves onto its second
  // page and another off it: every kind of change is there, whatever the machine's speed.
  const frozen = 1_700_000_000_000;
  let shift = 0;
  await using sim = await simulator({ seed: 23, driftEveryMs: 60_000, resultsPerQuery: 30, epoch: () => frozen + shift });
  writeFileSync(dir.path('queries.csv'), QUERIES_CSV);
  const pipeline = (): PipelineDefinition => ({ name: 'tagged', source: searchPages({ queriesFile: dir.path('queries.csv'), countries: ['us'], maxPages: 2 }), stages: [normalize()], sinks: sinks() });
  expect((await runOn(sim, pipeline())).status).toBe('completed');
  shift = 10 * 60_000;
  sim.inject({ fault: 'status', status: 400, match: { q: 'kettle' } });
  expect((await runOn(sim, pipeline())).status).toBe('failed_series');
  const exported = async (report: string) => {
    const result = await cli(['export', database, '--report', report, '--out', `${report}.csv`], { cwd: dir.dir });
    expect(result.code, result.stderr).toBe(0);
    const text = readFileSync(dir.path(`${report}.csv`), 'utf8');
    return { header: text.split('\r\n')[0]?.split(',') ?? [], rows: parse(text, { columns: true, record_delimiter: '\r\n' }) as Record<string, string>[] };
  };
  return { rankings: await exported('rankings'), changes: await exported('changes') };
}

function expectTagged({ rankings, changes }: Awaited<ReturnType<typeof twoRunsExported>>) {
  // rankings: the view's columns, then the tags, on every row with its query's values.
  expect(rankings.header.slice(-3)).toEqual(['age_runs', 'category', 'reason']);
  expect(new Set(rankings.rows.map((row) => row.query))).toEqual(new Set(Object.keys(TAGS)));
  for (const row of rankings.rows) expect({ category: row.category, reason: row.reason }).toEqual(TAGS[row.query as string]);

  // changes: its own `reason` (why a series failed) stays its own; the tag of that name is tag_reason.
  expect(changes.header.slice(-4)).toEqual(['previous_run_id', 'reason', 'category', 'tag_reason']);
  const kinds = new Set(changes.rows.map((row) => row.change));
  expect(kinds.has('failed') && (kinds.has('up') || kinds.has('down')) && kinds.has('new') && kinds.has('lost'), [...kinds].join(' ')).toBe(true);
  for (const row of changes.rows) {
    const tags = TAGS[row.query as string];
    expect({ change: row.change, category: row.category, tag_reason: row.tag_reason }).toEqual({ change: row.change, category: tags?.category, tag_reason: tags?.reason });
  }
  // The failed series keeps its tags (from its last complete run), beside why it failed.
  expect(changes.rows.filter((row) => row.change === 'failed')).toEqual([expect.objectContaining({ query: 'kettle', reason: 'failed', category: 'kitchen', tag_reason: 'tea' })]);
}

describe("a query file's tag columns in the reports", () => {
  it('SQLite: export --report rankings and --report changes have the tag columns, with the right values', async () => {
    using dir = workdir();
    expectTagged(await twoRunsExported(dir, () => [toSqlite({ path: dir.path('tagged.sqlite') })], dir.path('tagged.sqlite')));
  });
});

describePostgres("a query file's tag columns in the reports, in PostgreSQL", () => {
  it('PostgreSQL: export --report rankings and --report changes have the tag columns, with the right values', async () => {
    using dir = workdir();
    const db = await testDatabase();
    try {
      expectTagged(await twoRunsExported(dir, () => [toPostgres({ url: db.url, table: 'results' })], db.url));
    } finally {
      await db.drop();
    }
  });
});
