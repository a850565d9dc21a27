// PostgreSQL throughput, in the same process run as the rest of the benchmark, on the same items:
//   (g) the pipeline into a PostgreSQL sink (state store in the same database: one transaction per page), against raw
//       node-postgres loops inserting the same rows into the same table (same DDL and indexes), a transaction per
//       page of 100 as the sink commits: a multi-row INSERT … VALUES, an INSERT … SELECT FROM unnest (the sink's
//       statement), and COPY FROM STDIN (pg-copy-streams);
//   (h) end to end against the zero-latency simulator: PostgreSQL as state store and sink, against the same run with
//       SQLite as both.
import { join } from 'node:path';
import { pipeline as pipe } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { dedupe, definePipeline, normalize, run, type RunSummary, searchPages, type Source, toPostgres, toSqlite } from '../../src/index.ts';
import { postgresBin, startCluster, type Cluster } from '../postgres/pg-cluster.ts';
import { bareFetch, CONCURRENCY, log, PAGES_PER_QUERY, PER_PAGE, perSecond, queryList, ratio, replay, setUp, timed } from './throughput.ts';

/** A database to measure in: WEBDATA_BENCH_DATABASE_URL (a server where it may create databases), else a throwaway cluster. */
export async function benchPostgres(): Promise<{ admin: string; close(): void } | undefined> {
  if (process.env.WEBDATA_BENCH_DATABASE_URL) return { admin: process.env.WEBDATA_BENCH_DATABASE_URL, close: () => undefined };
  const bin = postgresBin();
  if (!bin) return undefined;
  const cluster: Cluster = await startCluster(bin);
  return { admin: cluster.url, close: () => cluster.destroy() };
}

/** A new, empty database on the bench's cluster (dropped first if a previous bench left it). */
/** The rows of one statement, on a connection of its own to `url`. */
export async function query<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end();
  }
}

export async function freshDatabase(admin: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * (g) Items per second into PostgreSQL: the pipeline's sink against raw node-postgres loops on the same rows, in
 * `rounds` interleaved rounds (the pipeline into a fresh database, then each raw loop into a fresh table), each
 * method's median and range, and the ratio's median over the rounds (each round's pipeline against that round's
 * faster raw method, so that the machine's drift between rounds weighs on both): one run of each varied by a third.
 */
export async function scenarioPostgresSink(admin: string, queries: number, rounds = 5) {
  log(`(g) PostgreSQL sink: ${queries * PAGES_PER_QUERY * PER_PAGE} items through normalize → dedupe → PostgreSQL, against raw pg loops, ${rounds} rounds`);
  const env = await setUp();
  try {
    const { pages } = await bareFetch(env.url, env.apiKey, queryList(queries), true);
    const measured: { pipeline: number; values: number; unnest: number; copy: number; written: number; rows: number }[] = [];
    for (let round = 1; round <= rounds; round++) {
      const url = await freshDatabase(admin, 'bench_sink');
      const piped = await timed(() =>
        run(
          definePipeline({ name: 'bench-pg', source: fedReplay(pages), stages: [normalize(), dedupe()], sinks: [toPostgres({ url, table: 'results' })], rate: { concurrency: CONCURRENCY } }),
          { baseUrl: env.url, apiKey: env.apiKey, env: {} },
        ),
      );
      const written = (piped.value as RunSummary).items.written;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      const raw = await rawLoops(client).finally(() => client.end());
      measured.push({ pipeline: piped.ms, ...raw, written });
      log(`    round ${round}: pipeline ${piped.ms} ms, multi-row INSERT ${raw.values} ms, unnest ${raw.unnest} ms, COPY ${raw.copy} ms`);
    }
    const { written, rows } = measured[0] as (typeof measured)[number];
    const rate = (count: number, ms: number) => perSecond(count, ms);
    const per = (pick: (m: (typeof measured)[number]) => number) => spread(measured.map(pick));
    const ratios = spread(measured.map((m) => ratio(rate(written, m.pipeline), Math.max(rate(rows, m.values), rate(rows, m.copy)))));
    const rates = {
      pipelineToPostgres: per((m) => rate(written, m.pipeline)),
      rawMultiRowInsert: per((m) => rate(rows, m.values)),
      rawUnnestInsert: per((m) => rate(rows, m.unnest)),
      rawCopy: per((m) => rate(rows, m.copy)),
    };
    return {
      items: { written, rows, pages: Math.ceil(rows / PER_PAGE) },
      rounds,
      // Medians and ranges over the rounds.
      itemsPerSecond: Object.fromEntries(Object.entries(rates).map(([k, v]) => [k, v.median])) as Record<keyof typeof rates, number>,
      itemsPerSecondRange: Object.fromEntries(Object.entries(rates).map(([k, v]) => [k, [v.min, v.max]])) as Record<keyof typeof rates, [number, number]>,
      pipelineOverFastestRaw: ratios.median,
      pipelineOverFastestRawRange: [ratios.min, ratios.max],
      copyOverMultiRowInsert: ratio(rates.rawCopy.median, rates.rawMultiRowInsert.median),
      ms: measured,
    };
  } finally {
    await env.close();
  }
}

/**
 * The bench's replay as a distributed run's worker pages it: the series the run's queue hands it (`ctx.feed`), each
 * page after page; else all of them, as `replay` does. A pipeline whose state and sink are one PostgreSQL database is
 * a one-worker distributed run, where a series' last page completes the series' job in its transaction: pages of
 * series never taken from the queue are refused there, as another worker's would be. Until 2026-11-26 (g) replayed
 * without the feed, so the last page of every series (200 of 1,000) was rolled back and its items went unwritten.
 */
function fedReplay(pages: Parameters<typeof replay>[0]): Source {
  const all = replay(pages);
  const bySeries = Map.groupBy([...pages].sort((a, b) => a.page - b.page), (page) => `search|${page.q}||`);
  return {
    plan: all.plan,
    async *pages(ctx) {
      const feed = ctx.feed?.(all.plan().series()[Symbol.iterator]());
      if (!feed) return yield* all.pages(ctx);
      for (let next = await feed.next(); !next.done; next = await feed.next()) {
        const series = next.value;
        yield* replay(bySeries.get(series.id) ?? []).pages(ctx);
      }
    },
  };
}

/** The median and range of a few figures. */
function spread(values: number[]): { median: number; min: number; max: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  return { median: Math.round(median * 1000) / 1000, min: sorted[0] as number, max: sorted.at(-1) as number };
}

/**
 * The rows the pipeline wrote at `url`, inserted again by raw node-postgres loops into tables of the same DDL and
 * indexes in the same database (`LIKE results INCLUDING ALL`), one transaction per page of 100: multi-row
 * INSERT … VALUES, INSERT … SELECT FROM unnest (the sink's statement), COPY FROM STDIN. Milliseconds each.
 */
async function rawLoops(client: pg.Client) {
  // The rows as the sink wrote them, as text (each type's input form), in the order written.
  const columns = (await client.query<{ name: string; type: string }>(`SELECT column_name AS name, udt_name AS type FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'results' ORDER BY ordinal_position`)).rows;
  const rows = (await client.query({ text: `SELECT ${columns.map((c) => `"${c.name}"::text`).join(', ')} FROM results`, rowMode: 'array' })).rows as (string | null)[][];
  const names = columns.map((c) => `"${c.name}"`).join(', ');
  const pagesOf = (all: (string | null)[][]) => Array.from({ length: Math.ceil(all.length / PER_PAGE) }, (_, i) => all.slice(i * PER_PAGE, (i + 1) * PER_PAGE));
  const perPage = async (name: string, write: (page: (string | null)[][]) => Promise<void>) => {
    await client.query(`DROP TABLE IF EXISTS ${name}; CREATE TABLE ${name} (LIKE results INCLUDING ALL)`);
    return (
      await timed(async () => {
        for (const page of pagesOf(rows)) {
          await client.query('BEGIN');
          await write(page);
          await client.query('COMMIT');
        }
      })
    ).ms;
  };
  const width = columns.length;
  const values = await perPage('raw_values', async (page) => {
    const placeholders = page.map((_, r) => `(${columns.map((c, i) => `$${r * width + i + 1}::${c.type}`).join(', ')})`).join(', ');
    await client.query(`INSERT INTO raw_values (${names}) VALUES ${placeholders}`, page.flat());
  });
  const unnest = await perPage('raw_unnest', async (page) => {
    const arrays = columns.map((_, i) => page.map((row) => row[i] ?? null));
    await client.query(`INSERT INTO raw_unnest (${names}) SELECT * FROM unnest(${columns.map((c, i) => `$${i + 1}::${c.type}[]`).join(', ')})`, arrays);
  });
  const copy = await perPage('raw_copy', async (page) => {
    const text = page.map((row) => row.map(copyText).join('\t')).join('\n') + '\n';
    await pipe(Readable.from([text]), client.query(copyFrom(`COPY raw_copy (${names}) FROM STDIN`)));
  });
  return { values, unnest, copy, rows: rows.length };
}

/** COPY's text format: tabs, newlines and backslashes escaped, NULL as \N. */
function copyText(value: string | null): string {
  if (value === null) return '\\N';
  return value.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r');
}

/** (h) End to end: PostgreSQL as state store and sink, against SQLite as both, on the same simulated pages. */
export async function scenarioPostgresEndToEnd(admin: string, queries: number) {
  log(`(h) end to end: ${queries * PAGES_PER_QUERY * PER_PAGE} items, PostgreSQL as state store and sink against SQLite`);
  const env = await setUp();
  const url = await freshDatabase(admin, 'bench_e2e');
  try {
    const list = queryList(queries);
    const plan = (name: string, sink: ReturnType<typeof toSqlite> | ReturnType<typeof toPostgres>) =>
      definePipeline({ name, source: searchPages({ queries: list, maxPages: PAGES_PER_QUERY, count: PER_PAGE }), stages: [normalize(), dedupe()], sinks: [sink], rate: { concurrency: CONCURRENCY } });
    const sqlite = await timed(() => run(plan('bench-e2e-sqlite', toSqlite({ path: join(env.dir, 'e2e.sqlite') })), { baseUrl: env.url, apiKey: env.apiKey, env: {} }));
    const postgres = await timed(() => run(plan('bench-e2e-pg', toPostgres({ url, table: 'results' })), { baseUrl: env.url, apiKey: env.apiKey, env: {} }));
    const rates = { sqlite: perSecond(sqlite.value.items.written, sqlite.ms), postgres: perSecond(postgres.value.items.written, postgres.ms) };
    return { itemsPerSecond: rates, postgresOverSqlite: ratio(rates.postgres, rates.sqlite), ms: { sqlite: sqlite.ms, postgres: postgres.ms }, status: { sqlite: sqlite.value.status, postgres: postgres.value.status } };
  } finally {
    await env.close();
  }
}
