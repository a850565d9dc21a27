// Throughput scenarios: how fast items go through the library compared with the floor of what it does, measured in
// the same process run, one after the other, on the same items.
//   (e) sinks: normalize → dedupe → SQLite (or CSV) through `run`, against a raw better-sqlite3 prepared-insert loop
//       in batched transactions into the same table (same DDL, same indexes; and without indexes), and against
//       csv-stringify writing the same rows to a file (its sync API a page at a time, as the sink uses it, and its
//       stream a row at a time);
//   (f) end to end: the whole pipeline (search → normalize → dedupe → SQLite + CSV) against a zero-latency
//       simulator, against a bare fetch loop reading the same pages from it at the same concurrency.
import { closeSync, createWriteStream, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import Database from 'better-sqlite3';
import { stringify } from 'csv-stringify';
import { stringify as stringifySync } from 'csv-stringify/sync';
import { dedupe, definePipeline, normalize, type Page, run, type RunSummary, searchPages, type NormalizedItem, type Sink, type Source, toCsv, toSqlite } from '../../src/index.ts';
import { createClient } from '../../src/client/index.ts';
import { type Series } from '../../src/pipeline/page.ts';
import { DEFAULT_CSV_COLUMNS } from '../../src/sinks/csv.ts';
import { unlimitedTarget } from './servers.ts';

export const PAGES_PER_QUERY = 5;
export const PER_PAGE = 100;
export const CONCURRENCY = 8;

export const log = (line: string) => process.stderr.write(`${line}\n`);
export const perSecond = (items: number, ms: number) => Math.round(items / (ms / 1000));
export const ratio = (part: number, whole: number) => Math.round((part / whole) * 1000) / 1000;
export const queryList = (queries: number) => Array.from({ length: queries }, (_, i) => `throughput query ${i}`);
/** Peak resident memory of this process so far (the kernel's high-water mark), in MB. */
export const peakRssMb = () => Math.round(process.resourceUsage().maxRSS / 1024);

export async function timed<T>(work: () => Promise<T> | T): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: Math.round(performance.now() - started) };
}

/** A zero-latency simulator that serves `queries` × 5 full pages of 100, and a scratch directory. */
export async function setUp() {
  const target = await unlimitedTarget({ latencyMs: 0, resultsPerQuery: PAGES_PER_QUERY * PER_PAGE, logLimit: 0 });
  const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-'));
  return {
    url: target.url,
    apiKey: target.apiKey,
    dir,
    debited: () => target.sim.stats().credits.main?.debited ?? 0,
    async close() {
      await target.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads every page of the plan once, with a bare client at the given concurrency; items kept as served. */
export async function bareFetch(url: string, apiKey: string, queries: string[], keep: boolean) {
  const client = createClient({ baseUrl: url, apiKey });
  const jobs = queries.flatMap((q) => Array.from({ length: PAGES_PER_QUERY }, (_, i) => ({ q, page: i + 1 })));
  const pages: { q: string; page: number; items: Record<string, unknown>[] }[] = [];
  let items = 0;
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < jobs.length) {
          const job = jobs[next++] as { q: string; page: number };
          const response = await client.search({ q: job.q, page: job.page, count: PER_PAGE });
          items += response.data.length;
          if (keep) pages.push({ ...job, items: response.data as Record<string, unknown>[] });
        }
      }),
    );
  } finally {
    await client.close();
  }
  return { items, pages };
}

/** A source that replays pages read earlier: the sink scenario measures stages and sinks, not the network. */
export function replay(pages: { q: string; page: number; items: Record<string, unknown>[] }[]): Source {
  const seriesOf = (q: string): Series => ({ id: `search|${q}||`, endpoint: '/searchengine/search', query: q, country: '', lang: '' });
  const ordered = [...pages].sort((a, b) => a.q.localeCompare(b.q) || a.page - b.page);
  const queries = [...new Set(ordered.map((p) => p.q))];
  return {
    plan: () => ({
      endpoint: '/searchengine/search',
      seriesCount: queries.length,
      maxPages: PAGES_PER_QUERY,
      fingerprint: { replay: queries.length },
      *series() {
        for (const q of queries) yield seriesOf(q);
      },
    }),
    async *pages(ctx) {
      for (const { q, page, items } of ordered) {
        const series = seriesOf(q);
        const last = page === PAGES_PER_QUERY;
        const replayed: Page = {
          key: `${series.id}#${page}`,
          series,
          number: page,
          items,
          meta: { status: 200, requestId: undefined, fetchedAt: new Date().toISOString(), latencyMs: 0, bytes: 0, served: items.length, ...(last ? { end: 'max_pages' as const } : {}) },
        };
        yield replayed;
        if (last) ctx.seriesEnded(series, { reason: 'max_pages', pages: PAGES_PER_QUERY });
      }
    },
  };
}

async function throughRun(name: string, source: Source, sinks: Sink<NormalizedItem>[], state: string, url: string, apiKey: string) {
  const { value, ms } = await timed(() =>
    run(definePipeline({ name, source, stages: [normalize(), dedupe()], sinks, state: { path: state }, rate: { concurrency: CONCURRENCY } }), { baseUrl: url, apiKey, env: {} }),
  );
  return { summary: value as RunSummary, ms };
}

/** (e) Items per second through stages and sinks, against raw better-sqlite3 and csv-stringify on the same rows. */
export async function scenarioSinks(queries: number) {
  const items = queries * PAGES_PER_QUERY * PER_PAGE;
  log(`(e) sinks: ${items} items through normalize → dedupe → SQLite / CSV, against raw better-sqlite3 and csv-stringify`);
  const env = await setUp();
  try {
    const { pages } = await bareFetch(env.url, env.apiKey, queryList(queries), true);
    const sqlitePath = join(env.dir, 'pipeline.sqlite');
    const sqlite = await throughRun('bench-sqlite', replay(pages), [toSqlite({ path: sqlitePath })], sqlitePath, env.url, env.apiKey);
    const csv = await throughRun('bench-csv', replay(pages), [toCsv({ path: join(env.dir, 'pipeline.csv') })], join(env.dir, 'csv-state.sqlite'), env.url, env.apiKey);
    const written = sqlite.summary.items.written;

    // The rows exactly as the pipeline wrote them, and the table exactly as it made it.
    const source = new Database(sqlitePath, { readonly: true });
    const ddl = source.prepare("SELECT sql FROM sqlite_master WHERE tbl_name = 'results' AND type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC").pluck().all() as string[];
    const columns = (source.prepare('PRAGMA table_info(results)').all() as { name: string }[]).map((c) => c.name);
    const rows = source.prepare(`SELECT ${columns.join(', ')} FROM results`).raw().all() as unknown[][];
    const csvRows = source.prepare(`SELECT ${DEFAULT_CSV_COLUMNS.join(', ')} FROM results`).raw().all() as unknown[][];
    source.close();

    const rawInsert = (file: string, withIndexes: boolean) => {
      const db = new Database(join(env.dir, file));
      // The sink's settings: WAL, synchronous=NORMAL.
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      for (const statement of withIndexes ? ddl : ddl.slice(0, 1)) db.exec(statement);
      const insert = db.prepare(`INSERT INTO results (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`);
      const batch = db.transaction((chunk: unknown[][]) => {
        for (const row of chunk) insert.run(row);
      });
      // One transaction per page, as the sink commits.
      for (let i = 0; i < rows.length; i += PER_PAGE) batch(rows.slice(i, i + PER_PAGE));
      db.close();
    };
    const rawIndexed = await timed(() => rawInsert('raw-indexed.sqlite', true));
    const rawBare = await timed(() => rawInsert('raw-bare.sqlite', false));
    // csv-stringify's sync API on a page of rows at a time, appended to the file: what the CSV sink does, bare.
    const csvStringifyPages = await timed(() => {
      const fd = openSync(join(env.dir, 'raw-pages.csv'), 'w');
      writeSync(fd, stringifySync([[...DEFAULT_CSV_COLUMNS]], { record_delimiter: '\r\n' }));
      for (let i = 0; i < csvRows.length; i += PER_PAGE) writeSync(fd, stringifySync(csvRows.slice(i, i + PER_PAGE), { record_delimiter: '\r\n' }));
      closeSync(fd);
    });
    // Its streaming API, a row at a time (with backpressure): the usual way to use it.
    const csvStringify = await timed(async () => {
      const out = createWriteStream(join(env.dir, 'raw.csv'));
      const stringifier = stringify({ header: true, columns: [...DEFAULT_CSV_COLUMNS], record_delimiter: '\r\n' });
      stringifier.pipe(out);
      for (const row of csvRows) if (!stringifier.write(row)) await new Promise((resolve) => stringifier.once('drain', resolve));
      stringifier.end();
      await finished(out);
    });

    const pipelineSqlite = perSecond(written, sqlite.ms);
    const pipelineCsv = perSecond(csv.summary.items.written, csv.ms);
    return {
      items: { served: sqlite.summary.items.served, written, indexes: ddl.length - 1 },
      itemsPerSecond: {
        pipelineToSqlite: pipelineSqlite,
        rawBetterSqlite3SameTable: perSecond(rows.length, rawIndexed.ms),
        rawBetterSqlite3NoIndexes: perSecond(rows.length, rawBare.ms),
        pipelineToCsv: pipelineCsv,
        csvStringifySyncByPage: perSecond(csvRows.length, csvStringifyPages.ms),
        csvStringifyStream: perSecond(csvRows.length, csvStringify.ms),
      },
      ratios: {
        pipelineSqliteOverRawSameTable: ratio(pipelineSqlite, perSecond(rows.length, rawIndexed.ms)),
        pipelineCsvOverCsvStringifySyncByPage: ratio(pipelineCsv, perSecond(csvRows.length, csvStringifyPages.ms)),
        pipelineCsvOverCsvStringifyStream: ratio(pipelineCsv, perSecond(csvRows.length, csvStringify.ms)),
      },
      ms: { pipelineToSqlite: sqlite.ms, rawSameTable: rawIndexed.ms, rawNoIndexes: rawBare.ms, pipelineToCsv: csv.ms, csvStringifySyncByPage: csvStringifyPages.ms, csvStringifyStream: csvStringify.ms },
      peakRssMbSoFar: peakRssMb(),
    };
  } finally {
    await env.close();
  }
}

/** (f) The whole pipeline against a zero-latency simulator, against a bare fetch loop of the same pages. */
export async function scenarioEndToEnd(queries: number) {
  const planned = queries * PAGES_PER_QUERY * PER_PAGE;
  log(`(f) end to end: ${planned} items, zero-latency simulator, pipeline (SQLite + CSV) against a bare fetch loop, concurrency ${CONCURRENCY}`);
  const env = await setUp();
  try {
    const list = queryList(queries);
    const bare = await timed(() => bareFetch(env.url, env.apiKey, list, false));
    const database = join(env.dir, 'e2e.sqlite');
    const pipeline = await timed(() =>
      run(
        definePipeline({
          name: 'bench-e2e',
          source: searchPages({ queries: list, maxPages: PAGES_PER_QUERY, count: PER_PAGE }),
          stages: [normalize(), dedupe()],
          sinks: [toSqlite({ path: database }), toCsv({ path: join(env.dir, 'e2e.csv') })],
          rate: { concurrency: CONCURRENCY },
        }),
        { baseUrl: env.url, apiKey: env.apiKey, env: {} },
      ),
    );
    const bareRate = perSecond(bare.value.items, bare.ms);
    const pipelineServed = perSecond(pipeline.value.items.served, pipeline.ms);
    return {
      concurrency: CONCURRENCY,
      items: { bare: bare.value.items, pipelineServed: pipeline.value.items.served, pipelineWritten: pipeline.value.items.written },
      itemsPerSecond: { bareFetchLoop: bareRate, pipelineServed, pipelineWritten: perSecond(pipeline.value.items.written, pipeline.ms) },
      pipelineOverBare: ratio(pipelineServed, bareRate),
      ms: { bareFetchLoop: bare.ms, pipeline: pipeline.ms },
      status: pipeline.value.status,
      creditsDebited: env.debited(),
      peakRssMbSoFar: peakRssMb(),
    };
  } finally {
    await env.close();
  }
}
