// stream(): a run's committed pages to the program's own `for await`, acknowledged by the next pull (issue 30, §2).
import { describe, expect, it } from 'vitest';
import { normalize, type NormalizedItem, type Page, type PipelineDefinition, searchPages, stream, toSqlite } from '../src/index.ts';
import { TEST_KEY } from './helpers.ts';
import { simulator } from './helpers.ts';
import { sqliteRows, workdir } from './pipeline-helpers.ts';
import type { Simulator } from '../src/simulator/index.ts';

/** Nine pages: one query in three countries, three pages each. */
const nine = (dir: string): PipelineDefinition => ({
  name: 'streamed',
  source: searchPages({ queries: ['espresso'], countries: ['us', 'gb', 'de'], maxPages: 3 }),
  stages: [normalize()],
  sinks: [toSqlite({ path: `${dir}/out.sqlite` })],
});

const on = (sim: Simulator, extra: { signal?: AbortSignal } = {}) => ({ baseUrl: sim.url, apiKey: TEST_KEY, env: {}, ...extra });

/** Every page's key in the SQLite table, once per page. */
const tablePages = (dir: string) => sqliteRows(`${dir}/out.sqlite`, "SELECT DISTINCT country || '#' || page AS page FROM results ORDER BY 1").map((row) => row.page);
const keyOf = (page: Page<NormalizedItem>) => `${page.items[0]?.country}#${page.number}`;

describe('stream(): committed pages to the program', () => {
  it('a loop that breaks after 4 of 9 pages: the run is interrupted, and the next stream() yields the other 5, none twice', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const first: string[] = [];
    const pages = stream<NormalizedItem>(nine(dir.dir), on(sim));
    for await (const page of pages) {
      // The fifth page is pulled, and left: it is not acknowledged.
      if (first.length === 4) break;
      first.push(keyOf(page));
    }
    expect((await pages.summary()).status).toBe('interrupted');

    const second: string[] = [];
    const again = stream<NormalizedItem>(nine(dir.dir), on(sim));
    for await (const page of again) second.push(keyOf(page));
    expect((await again.summary()).status).toBe('completed');
    expect(first).toHaveLength(4);
    expect(second).toHaveLength(5);
    expect([...first, ...second].sort()).toEqual(tablePages(dir.dir));
  });

  it('a loop that throws on a page leaves it unacknowledged: the next stream() yields it first, and no other twice', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const first: string[] = [];
    const failure = await (async () => {
      for await (const page of stream<NormalizedItem>(nine(dir.dir), on(sim))) {
        if (first.length === 2) throw new Error(`cannot take ${keyOf(page)}`);
        first.push(keyOf(page));
      }
    })().catch((error: unknown) => error as Error);
    const thrownOn = String(failure?.message).replace('cannot take ', '');

    const second: string[] = [];
    for await (const page of stream<NormalizedItem>(nine(dir.dir), on(sim))) second.push(keyOf(page));
    expect(second[0]).toBe(thrownOn);
    expect([...first, ...second].sort()).toEqual(tablePages(dir.dir));
    expect(new Set([...first, ...second]).size).toBe(9);
  });

  it('a signal stops the run gracefully: the loop ends with the pages committed, the run is interrupted, and a resume completes it', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const stop = new AbortController();
    const first: string[] = [];
    const pages = stream<NormalizedItem>(nine(dir.dir), on(sim, { signal: stop.signal }));
    for await (const page of pages) {
      first.push(keyOf(page));
      if (first.length === 2) stop.abort();
    }
    expect((await pages.summary()).status).toBe('interrupted');
    expect(first.length).toBeGreaterThanOrEqual(2);
    expect(first.length).toBeLessThan(9);

    const rest: string[] = [];
    const again = stream<NormalizedItem>(nine(dir.dir), on(sim));
    for await (const page of again) rest.push(keyOf(page));
    expect((await again.summary()).status).toBe('completed');
    expect([...first, ...rest].sort()).toEqual(tablePages(dir.dir));
  });

  it('items(): the same run item by item, every item the table holds', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const urls: (string | null)[] = [];
    const items = stream<NormalizedItem>(nine(dir.dir), on(sim));
    for await (const item of items.items()) urls.push(item.url);
    expect((await items.summary()).status).toBe('completed');
    expect(urls).toHaveLength(sqliteRows(`${dir.dir}/out.sqlite`, 'SELECT COUNT(*) AS n FROM results')[0]?.n as number);
  });

  it('a run that fails ends the loop with its failure', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const breaking: PipelineDefinition = {
      ...nine(dir.dir),
      stages: [
        normalize(),
        async function* (pages) {
          let n = 0;
          for await (const page of pages) {
            if ((n += 1) === 3) throw new Error('the stage broke');
            yield page;
          }
        },
      ],
    };
    const seen: string[] = [];
    const error = await (async () => {
      for await (const page of stream<NormalizedItem>(breaking, on(sim))) seen.push(keyOf(page));
    })().catch((failure: unknown) => failure as Error);
    expect(String(error)).toContain('the stage broke');
    expect(seen.length).toBeLessThan(3);
  });
});
