// year.ts's PostgreSQL store (`--store postgres`): a throwaway cluster (test/postgres/pg-cluster.ts) holding the
// pipeline's sink (schema public) and its state (schema webdata), and what a year left in it: the database's size and
// each table's, the rows of the tables that grow, each view's time and `webdata-etl runs <url> --json` (spawned).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { createPostgresResultsViews } from '../../src/analytics/postgres-views.ts';
import { applicableViews } from '../../src/analytics/views.ts';
import { openPool } from '../../src/postgres/pools.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { postgresOutcomeStatements, postgresSinkStatements } from '../../src/sinks/statements.ts';
import { postgresBin, startCluster, type Cluster } from '../postgres/pg-cluster.ts';

const STATE = ['runs', 'series', 'series_state', 'pages', 'run_sinks', 'spend'];
const SINK = ['results', 'results_outcomes'];
/** The views timed, each with its schema: the results' in the sink's, the ledger's in the state store's. */
const VIEWS = [
  ['public', 'report_rankings'],
  ['public', 'report_domains'],
  ['public', 'report_overlap'],
  ['public', 'report_changes'],
  ['webdata', 'webdata_spend'],
] as const;

/** A cluster for one variant: throwaway, or kept in `dir` (started again there when a year is already in it). */
export async function yearCluster(dir: string | undefined): Promise<Cluster> {
  const bin = postgresBin();
  if (bin === undefined) throw new Error('no PostgreSQL binaries (initdb, pg_ctl) under /usr/lib/postgresql');
  return startCluster(bin, dir);
}

/** Milliseconds `work` takes. */
async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return Math.round(performance.now() - started);
}

/**
 * What a year left in the database at `url`: its size and each table's (with its indexes and TOAST), the growing
 * tables' rows, each view's `SELECT count(*)` (twice: the first reads from disk what the second finds cached), and
 * `runs --json` spawned. `plans`: a file to write each view's EXPLAIN (ANALYZE, BUFFERS) in.
 */
export async function measurePostgres(url: string, cli: string, plans?: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('VACUUM ANALYZE');
    const bytes = Number((await client.query<{ size: string }>('SELECT pg_database_size(current_database()) AS size')).rows[0]?.size);
    const { rows: sizes } = await client.query<{ name: string; total: string; indexes: string }>(
      `SELECT n.nspname || '.' || c.relname AS name, pg_total_relation_size(c.oid) AS total, pg_indexes_size(c.oid) AS indexes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname IN ('public', 'webdata')
       ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 12`,
    );
    const tables = Object.fromEntries(sizes.map((row) => [row.name, { mb: Math.round(Number(row.total) / 1e5) / 10, indexesMb: Math.round(Number(row.indexes) / 1e5) / 10 }]));
    const rows: Record<string, number> = {};
    for (const [schema, names] of [['webdata', STATE], ['public', SINK]] as const) {
      for (const table of names) rows[table] = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.${table}`)).rows[0]?.n);
    }
    const viewsMs: Record<string, [number, number]> = {};
    const explained: string[] = [];
    for (const [schema, view] of VIEWS) {
      const sql = `SELECT count(*) FROM ${schema}.${view}`;
      viewsMs[view] = [await timed(() => client.query(sql)), await timed(() => client.query(sql))];
      if (plans !== undefined) {
        const { rows: plan } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`);
        explained.push(`== ${view}\n${plan.map((line) => line['QUERY PLAN']).join('\n')}\n`);
      }
    }
    if (plans !== undefined) writeFileSync(plans, explained.join('\n'));
    const runsMs = await timed(async () => execFileSync(process.execPath, [cli, 'runs', url, '--json'], { stdio: 'ignore' }));
    return { bytes, tables, rows, viewsMs, runsMs };
  } finally {
    await client.end();
  }
}

/**
 * The results' views re-created as the next run opening the sink would, and the indexes it makes first on tables made
 * before them (the results' series index, the outcomes' series and runs indexes): how long each took, in ms (0: there
 * already).
 */
export async function recreatePostgresViews(url: string): Promise<{ seriesIndexMs: number; outcomesIndexesMs?: number }> {
  const pool = openPool(postgresTarget(url), 1);
  try {
    // A checkout from before the index (src/ of an older commit, to measure a year before and after): none made.
    if (!('seriesRunsIndexed' in postgresSinkStatements)) {
      await pool.query('DROP VIEW IF EXISTS public.report_changes, public.report_overlap, public.report_domains, public.report_rankings');
      await createPostgresResultsViews(pool, 'public', 'results', applicableViews('append', true), 'append');
      return { seriesIndexMs: 0 };
    }
    const indexed = (await pool.query(postgresSinkStatements.seriesRunsIndexed, ['public', 'results'])).rowCount === 1;
    const seriesIndexMs = indexed ? 0 : await timed(() => pool.query(postgresSinkStatements.seriesRunsIndex('public', 'results')));
    const outcomes = postgresOutcomeStatements('public', 'results');
    // A checkout from before the outcomes' indexes: none made.
    const outcomesIndexesMs = !('indexed' in outcomes)
      ? undefined
      : (await pool.query(outcomes.indexed, ['public', 'results_outcomes'])).rowCount === 1
        ? 0
        : await timed(async () => {
            await pool.query(outcomes.seriesRunsIndex);
            await pool.query(outcomes.runsIndex);
          });
    await pool.query('DROP VIEW IF EXISTS public.report_changes, public.report_overlap, public.report_domains, public.report_rankings');
    await createPostgresResultsViews(pool, 'public', 'results', applicableViews('append', true), 'append');
    return { seriesIndexMs, ...(outcomesIndexesMs === undefined ? {} : { outcomesIndexesMs }) };
  } finally {
    await pool.end();
  }
}
