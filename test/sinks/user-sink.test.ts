// A sink of your own: `defineSink` takes what a sink must decide (open, write, close) and provides delivery — the
// checkpoint after each write, and re-delivery from the journal of what a crash kept from it.
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defineSink, normalize, type NormalizedItem, type Page, searchPages, toSqlite } from '../../src/index.ts';
import { cli, envFor, ROOT } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

/** A sink into the caller's own array, as the docs show it; `failAt` makes its n-th write throw (after the commit). */
function intoArray(pages: Page<NormalizedItem>[], failAt?: number) {
  let writes = 0;
  return defineSink({
    kind: 'array',
    target: 'my pages',
    write(page) {
      writes += 1;
      if (writes === failAt) throw new Error('the downstream system is down');
      pages.push(page);
    },
  });
}

const pipeline = (dir: string, sink: ReturnType<typeof intoArray>, queries = ['espresso', 'kettle']) => ({
  name: 'own-sink',
  source: searchPages({ queries, countries: ['us'], maxPages: 3 }),
  stages: [normalize()],
  sinks: [toSqlite({ path: `${dir}/out.sqlite` }), sink],
});

describe('a sink of your own', () => {
  it('gets every committed page once, in order of commit, and the summary says how it was delivered', async () => {
    await using sim = await simulator({ seed: 4 });
    using dir = workdir();
    const pages: Page<NormalizedItem>[] = [];
    const summary = await runOn(sim, pipeline(dir.dir, intoArray(pages)));
    expect(summary.status).toBe('completed');
    expect(pages.map((page) => page.key)).toHaveLength(summary.pages.fetched);
    expect(new Set(pages.map((page) => page.key)).size).toBe(pages.length);
    expect(pages.flatMap((page) => page.items)).toHaveLength(summary.items.written);
    expect(summary.outputs).toContainEqual({ kind: 'array', path: 'my pages', delivery: 'at_least_once' });
  });

  it('a page its write failed on is re-delivered from the journal when the run resumes: none lost, none twice', async () => {
    await using sim = await simulator({ seed: 4 });
    using dir = workdir();
    const first: Page<NormalizedItem>[] = [];
    // The third page commits (rows, progress, journal), then the sink's write throws: the run ends there.
    const failed = await runOn(sim, pipeline(dir.dir, intoArray(first, 3))).catch((error: unknown) => error);
    expect(String(failed)).toContain('the downstream system is down');
    expect(first).toHaveLength(2);

    const second: Page<NormalizedItem>[] = [];
    const summary = await runOn(sim, pipeline(dir.dir, intoArray(second)));
    expect(summary.status).toBe('completed');
    const keys = [...first, ...second].map((page) => page.key);
    expect(new Set(keys).size).toBe(keys.length);
    // Every page the SQLite table holds reached the array too, once.
    const committed = sqliteRows(dir.path('out.sqlite'), 'SELECT COUNT(DISTINCT query || page) AS n FROM results')[0]?.n;
    expect(keys).toHaveLength(Number(committed));
    expect(second[0]?.key).not.toBe(first[1]?.key);
  });

  // A hang is what failed here: every permit was held by a page whose commit had failed, so no page could come to
  // the loop that was waiting for one to notice the failure.
  it('a page that fails to commit while the loop waits for the next ends the run at once, with that failure', { timeout: 20_000 }, async () => {
    await using sim = await simulator({ seed: 4 });
    using dir = workdir();
    const pages: Page<NormalizedItem>[] = [];
    // One request at a time: the one permit stays with the first page, whose sink then fails.
    const failed = await runOn(sim, { ...pipeline(dir.dir, intoArray(pages, 1), ['espresso']), rate: { concurrency: 1 } }).catch((error: unknown) => error);
    expect(String(failed)).toContain('the downstream system is down');
    expect(pages).toEqual([]);
    // The page committed before its sink failed: the table has it, the journal keeps it for the sink.
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT DISTINCT page FROM results')).toEqual([{ page: 1 }]);
  });

  it('a target that is a URL is no path: the state goes to <name>.state.sqlite, or beside a file sink (was a directory "https:")', async () => {
    await using sim = await simulator({ seed: 4 });
    using dir = workdir();
    // A pipeline file with a webhook-like sink alone, then with a CSV file after it, run from the command line in `dir`.
    const file = (name: string, sinks: string) => {
      const source = `import * as etl from ${JSON.stringify(join(ROOT, 'src/index.ts'))};
const hook = etl.defineSink({ kind: 'webhook', target: 'https://hooks.example.com/ingest', write() {} });
export default etl.definePipeline({ name: ${JSON.stringify(name)}, source: etl.searchPages({ queries: ['espresso'], maxPages: 1 }), stages: [etl.normalize()], sinks: ${sinks} });
`;
      writeFileSync(dir.path(`${name}.ts`), source);
      return `${name}.ts`;
    };
    const alone = await cli(['run', file('hooked', '[hook]'), '--quiet'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(alone.code, alone.stderr).toBe(0);
    const withCsv = await cli(['run', file('hooked-csv', "[hook, etl.toCsv({ path: 'out/rows.csv' })]"), '--quiet'], { cwd: dir.dir, env: envFor(sim.url) });
    expect(withCsv.code, withCsv.stderr).toBe(0);
    expect(existsSync(dir.path('https:'))).toBe(false);
    expect(existsSync(dir.path('hooked.state.sqlite'))).toBe(true);
    expect(readdirSync(dir.path('out')).sort()).toEqual(expect.arrayContaining(['hooked-csv.state.sqlite', 'rows.csv']));
  });
});
