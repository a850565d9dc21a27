// stream(): a run's committed pages to the program's own `for await`, acknowledged by the next pull (issue 30, §2).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, type NormalizedItem, type Page, searchPages, stream, toSqlite } from '../../src/index.ts';
import { TEST_KEY } from '../helpers.ts';
import { simulator } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { measuredNode } from '../cli/peak-rss.ts';

/** Nine pages: one query in three countries, three pages each. */
const nine = (dir: string) =>
  definePipeline({
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
    const pages = stream(nine(dir.dir), on(sim));
    for await (const page of pages) {
      // The fifth page is pulled, and left: it is not acknowledged.
      if (first.length === 4) break;
      first.push(keyOf(page));
    }
    expect((await pages.summary()).status).toBe('interrupted');

    const second: string[] = [];
    const again = stream(nine(dir.dir), on(sim));
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
      for await (const page of stream(nine(dir.dir), on(sim))) {
        if (first.length === 2) throw new Error(`cannot take ${keyOf(page)}`);
        first.push(keyOf(page));
      }
    })().catch((error: unknown) => error as Error);
    const thrownOn = String(failure?.message).replace('cannot take ', '');

    const second: string[] = [];
    for await (const page of stream(nine(dir.dir), on(sim))) second.push(keyOf(page));
    expect(second[0]).toBe(thrownOn);
    expect([...first, ...second].sort()).toEqual(tablePages(dir.dir));
    expect(new Set([...first, ...second]).size).toBe(9);
  });

  it('a signal stops the run gracefully: the loop ends with the pages committed, the run is interrupted, and a resume completes it', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const stop = new AbortController();
    const first: string[] = [];
    const pages = stream(nine(dir.dir), on(sim, { signal: stop.signal }));
    for await (const page of pages) {
      first.push(keyOf(page));
      if (first.length === 2) stop.abort();
    }
    expect((await pages.summary()).status).toBe('interrupted');
    expect(first.length).toBeGreaterThanOrEqual(2);
    expect(first.length).toBeLessThan(9);

    const rest: string[] = [];
    const again = stream(nine(dir.dir), on(sim));
    for await (const page of again) rest.push(keyOf(page));
    expect((await again.summary()).status).toBe('completed');
    expect([...first, ...rest].sort()).toEqual(tablePages(dir.dir));
  });

  it('items(): the same run item by item, every item the table holds', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const urls: (string | null)[] = [];
    const items = stream(nine(dir.dir), on(sim));
    for await (const item of items.items()) urls.push(item.url);
    expect((await items.summary()).status).toBe('completed');
    expect(urls).toHaveLength(sqliteRows(`${dir.dir}/out.sqlite`, 'SELECT COUNT(*) AS n FROM results')[0]?.n as number);
  });

  it('a pipeline with no sink of its own streams: the program is its one output, and a resume goes on from the stream\'s place', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const only = { ...nine(dir.dir), sinks: [], state: { ...nine(dir.dir).state, path: `${dir.dir}/state.sqlite` } };
    const first: string[] = [];
    for await (const page of stream(only, on(sim))) {
      if (first.length === 3) break;
      first.push(keyOf(page));
    }
    const rest: string[] = [];
    const again = stream(only, on(sim));
    for await (const page of again) rest.push(keyOf(page));
    expect((await again.summary()).status).toBe('completed');
    expect(new Set([...first, ...rest]).size).toBe(first.length + rest.length);
    expect(first.length + rest.length).toBe(9);
  });

  it('a run that fails ends the loop with its failure', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const breaking = {
      ...nine(dir.dir),
      stages: [
        normalize(),
        async function* (pages: AsyncIterable<Page<NormalizedItem>>) {
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
      for await (const page of stream(breaking, on(sim))) seen.push(keyOf(page));
    })().catch((failure: unknown) => failure as Error);
    expect(String(error)).toContain('the stage broke');
    expect(seen.length).toBeLessThan(3);
  });

  it('a slow loop over 100,000 items: the run waits for it, and the program\'s heap stays flat', async () => {
    await using sim = await simulator({ resultsPerQuery: 500, latencyMs: 0, logLimit: 0 });
    using dir = workdir();
    // A program of its own (as a user's, importing the built package), its heap read after a collection at each tenth.
    const result = await measuredNode(['--expose-gc', join(import.meta.dirname, '../fixtures/slow-consumer.ts')], {
      cwd: dir.dir,
      env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEY: TEST_KEY, STREAM_QUERIES: '200', STREAM_PAUSE_MS: '2', STREAM_DIR: dir.dir },
    });
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { items: number; pages: number; heap: number[]; status: string; served: number };
    expect(out.status).toBe('completed');
    expect(out.pages).toBe(1000);
    expect(out.items).toBe(out.served);
    expect(out.items).toBe(100_000);
    // Flat: the heap at the end holds no more than at the first tenth, but for what a run keeps per series (a few MB).
    const [first, ...rest] = out.heap as [number, ...number[]];
    console.log(`[stream] 100,000 items to a slow loop: heap ${out.heap.join(', ')} MB, peak RSS ${result.peakRssMb} MB, ${result.seconds} s`);
    expect(Math.max(...rest) - first).toBeLessThan(16);
  }, 120_000);
});
