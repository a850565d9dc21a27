import type { Pool } from '../postgres/pools.ts';
import { transaction } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { POSTGRES } from './dialect.ts';
import { keySpendViewSql, postgresReaderStatements, type ResultsView, resultsViewsSql, spendViewSql, trackedLatestViewSql, trackedViewSql, viewStatements } from './statements.ts';
import { trackedTable } from '../sinks/series-tracked.ts';
import { tagColumnsOf } from './view-tags.ts';
import { CREATE_ORDER, DROP_ORDER, KEY_SPEND_VIEW, runsRead, viewName } from './views.ts';
import { outcomesTable } from '../sinks/series-outcomes.ts';
import { preparePostgresOutcomes } from '../sinks/postgres-outcomes.ts';

/**
 * The analytics views over a PostgreSQL results table written in `mode`, in its schema, with the same names, columns and
 * numbers as in SQLite (the same SQL: see `resultsViewsSql`), and the outcomes table they read beside it when it has
 * none. Re-created on every run so that they follow the table.
 */
export async function createPostgresResultsViews(pool: Pool, schema: string, table: string, views: readonly ResultsView[], mode: 'append' | 'replace' | 'upsert' = 'append'): Promise<void> {
  const s = quoteIdentifier(schema);
  const name = (view: ResultsView) => `${s}.${quoteIdentifier(viewName(table, view))}`;
  await transaction(pool, async (client) => {
    // Two runs opening at once would race to re-create them: one at a time.
    await client.query(viewStatements.lock, [`webdata-etl:views:${schema}.${table}`]);
    const columns = await client.query<{ name: string }>(postgresReaderStatements.tableColumns, [schema, table]);
    const tags = tagColumnsOf(columns.rows.map((column) => column.name));
    const sql = resultsViewsSql(`${s}.${quoteIdentifier(table)}`, `${s}.${quoteIdentifier(outcomesTable(table))}`, name, POSTGRES, runsRead(mode), tags);
    if (views.length > 0) await preparePostgresOutcomes(client, schema, table, `schema ${schema}`);
    for (const view of DROP_ORDER) await client.query(viewStatements.drop(name(view)));
    for (const view of CREATE_ORDER) if (views.includes(view)) await client.query(viewStatements.create(name(view), sql[view]));
    // Beside a table whose pipeline tracks domains (sinks/series-tracked.ts), as in SQLite.
    const tracked = `${s}.${quoteIdentifier(viewName(table, 'tracked'))}`;
    const latest = `${s}.${quoteIdentifier(viewName(table, 'tracked_latest'))}`;
    await client.query(viewStatements.drop(latest));
    await client.query(viewStatements.drop(tracked));
    const has = async (relation: string) => (await client.query(postgresReaderStatements.tableColumns, [schema, relation])).rows.length > 0;
    if (await has(trackedTable(table))) {
      const k = `${s}.${quoteIdentifier(trackedTable(table))}`;
      await client.query(viewStatements.create(tracked, trackedViewSql(k, POSTGRES)));
      const runs = (await has(outcomesTable(table))) ? `${s}.${quoteIdentifier(outcomesTable(table))}` : k;
      await client.query(viewStatements.create(latest, trackedLatestViewSql(k, runs, POSTGRES)));
    }
  });
}

/**
 * The spend views, in the PostgreSQL state store's schema: `report_spend` and `webdata_spend`, as in SQLite
 * (`createSpendView`); replaced, not dropped, so that a view of the user's over them stands.
 */
export async function createPostgresSpendView(pool: Pool, schema: string): Promise<void> {
  const s = quoteIdentifier(schema);
  await transaction(pool, async (client) => {
    await client.query(viewStatements.lock, [`webdata-etl:views:${schema}.spend`]);
    await client.query(viewStatements.createOrReplace(`${s}.${quoteIdentifier(viewName('results', 'spend'))}`, spendViewSql(`${s}.`, POSTGRES)));
    await client.query(viewStatements.createOrReplace(`${s}.${quoteIdentifier(KEY_SPEND_VIEW)}`, keySpendViewSql(`${s}.`, POSTGRES)));
  });
}
