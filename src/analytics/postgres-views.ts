import type { Pool, PoolClient } from '../postgres/pools.ts';
import { transaction } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { POSTGRES } from './dialect.ts';
import { keySpendViewSql, postgresReaderStatements, type ResultsView, resultsViewsSql, spendViewSql, trackedLatestViewSql, trackedViewSql, viewStatements } from './statements.ts';
import { trackedTable } from '../sinks/series-tracked.ts';
import { tagColumnsOf } from './view-tags.ts';
import { CREATE_ORDER, DROP_ORDER, KEY_SPEND_VIEW, runsRead, viewName } from './views.ts';
import { outcomesTable } from '../sinks/series-outcomes.ts';
import { preparePostgresOutcomes } from '../sinks/postgres-outcomes.ts';
import { OUTCOMES_INDEXED, postgresSinkStatements } from '../sinks/statements.ts';
import { markPostgresViews, type PlannedViews, postgresViewsCurrent } from './view-marks.ts';

/**
 * The analytics views over a PostgreSQL results table written in `mode`, in its schema, with the same names, columns and
 * numbers as in SQLite (the same SQL: see `resultsViewsSql`), and the outcomes table they read beside it when it has
 * none. Made again when they no longer follow the table (its columns, the tracked domains beside it, this version's
 * SQL): views already what this run would make (`postgresViewsCurrent`, read without a lock) are left as they are, so
 * that the workers joining a run do not drop and re-create, one at a time, the views its planner has just made.
 */
export async function createPostgresResultsViews(pool: Pool, schema: string, table: string, views: readonly ResultsView[], mode: 'append' | 'replace' | 'upsert' = 'append'): Promise<void> {
  const s = quoteIdentifier(schema);
  const quoted = (view: string) => `${s}.${quoteIdentifier(view)}`;
  if (await postgresViewsCurrent(pool, schema, await plannedResultsViews(pool, schema, table, views, mode))) return;
  await transaction(pool, async (client) => {
    // Two runs opening at once would race to re-create them: one at a time; the second finds the first's current.
    await client.query(viewStatements.lock, [`webdata-etl:views:${schema}.${table}`]);
    // The outcomes table (and its series index) first: the views are planned over what it has.
    if (views.length > 0) await preparePostgresOutcomes(client, schema, table, `schema ${schema}`);
    const planned = await plannedResultsViews(client, schema, table, views, mode);
    if (await postgresViewsCurrent(client, schema, planned)) return;
    for (const view of DROP_ORDER) await client.query(viewStatements.drop(quoted(viewName(table, view))));
    await client.query(viewStatements.drop(quoted(viewName(table, 'tracked_latest'))));
    await client.query(viewStatements.drop(quoted(viewName(table, 'tracked'))));
    for (const view of planned.create) await client.query(viewStatements.create(quoted(view.name), view.select));
    await markPostgresViews(client, schema, planned, quoted);
  });
}

/**
 * What the results table's views would be: `views` in their order over the table's columns, and `report_tracked` and
 * `report_tracked_latest` beside a table whose pipeline tracks domains (sinks/series-tracked.ts), as in SQLite; the
 * others' names, which must not be views.
 */
async function plannedResultsViews(db: Pool | PoolClient, schema: string, table: string, views: readonly ResultsView[], mode: 'append' | 'replace' | 'upsert'): Promise<PlannedViews> {
  const s = quoteIdentifier(schema);
  const quoted = (relation: string) => `${s}.${quoteIdentifier(relation)}`;
  const { rows } = await db.query<{ relation: string; name: string }>(postgresReaderStatements.tablesColumns, [schema, [table, trackedTable(table), outcomesTable(table)]]);
  const columnsOf = (relation: string) => rows.filter((row) => row.relation === relation).map((row) => row.name);
  const [columns, tracked, outcomes] = [columnsOf(table), columnsOf(trackedTable(table)), columnsOf(outcomesTable(table))];
  // Where the table has its series index (the sink makes it), the views walk it rather than read the table whole.
  const indexed = (await db.query(postgresSinkStatements.seriesRunsIndexed, [schema, table])).rowCount === 1;
  // Likewise the outcomes table's: the views look each series' runs, and the runs, up along them (postgres-outcomes.ts).
  const outcomesIndexed = (await db.query(OUTCOMES_INDEXED, [schema, outcomesTable(table)])).rowCount === 1;
  const sql = resultsViewsSql(
    quoted(table),
    quoted(outcomesTable(table)),
    (view) => quoted(viewName(table, view)),
    POSTGRES,
    runsRead(mode),
    tagColumnsOf(columns),
    indexed,
    outcomesIndexed,
  );
  const create: { name: string; select: string }[] = CREATE_ORDER.filter((view) => views.includes(view)).map((view) => ({ name: viewName(table, view), select: sql[view] }));
  const absent: string[] = CREATE_ORDER.filter((view) => !views.includes(view)).map((view) => viewName(table, view));
  const trackedNames = [viewName(table, 'tracked'), viewName(table, 'tracked_latest')] as const;
  if (tracked.length > 0) {
    const k = quoted(trackedTable(table));
    // Ages count the runs the outcomes table records, which the views above make when it is missing.
    const runs = outcomes.length > 0 || views.length > 0 ? quoted(outcomesTable(table)) : k;
    create.push({ name: trackedNames[0], select: trackedViewSql(k, POSTGRES) }, { name: trackedNames[1], select: trackedLatestViewSql(k, runs, POSTGRES) });
  } else {
    absent.push(...trackedNames);
  }
  return { create, absent };
}

/**
 * The spend views, in the PostgreSQL state store's schema: `report_spend` and `webdata_spend`, as in SQLite
 * (`createSpendView`); replaced, not dropped, so that a view of the user's over them stands; left as they are when
 * already current, as the results' views are.
 */
export async function createPostgresSpendView(pool: Pool, schema: string): Promise<void> {
  const s = quoteIdentifier(schema);
  const quoted = (view: string) => `${s}.${quoteIdentifier(view)}`;
  const planned: PlannedViews = {
    create: [
      { name: viewName('results', 'spend'), select: spendViewSql(`${s}.`, POSTGRES) },
      { name: KEY_SPEND_VIEW, select: keySpendViewSql(`${s}.`, POSTGRES) },
    ],
    absent: [],
  };
  if (await postgresViewsCurrent(pool, schema, planned)) return;
  await transaction(pool, async (client) => {
    await client.query(viewStatements.lock, [`webdata-etl:views:${schema}.spend`]);
    if (await postgresViewsCurrent(client, schema, planned)) return;
    for (const view of planned.create) await client.query(viewStatements.createOrReplace(quoted(view.name), view.select));
    await markPostgresViews(client, schema, planned, quoted);
  });
}
