import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from '../postgres/pools.ts';
import { viewMarkStatements } from './statements.ts';

/** The views a run wants in a schema: each one's name (unquoted, as the catalog has it) and SELECT, and names that must not be views. */
export interface PlannedViews {
  readonly create: readonly { readonly name: string; readonly select: string }[];
  readonly absent: readonly string[];
}

/**
 * Whether a schema's views are already what `planned` would make, so that a run (every worker of a fleet, each time
 * it opens) need not drop and re-create them under a lock: each view carries, as its comment, the hash of the SELECT it
 * was made from and the version of the rule PostgreSQL keeps for it (its `pg_rewrite` row's xmin, which any
 * `CREATE OR REPLACE` changes) as it was made (`markPostgresViews`). A view made from other SQL (another version of
 * webdata-etl, another set of the table's columns), replaced since by anyone, or left unmarked, is not current; nor is
 * a name in `absent` that is a view. Catalog rows only, read without locking any view: `pg_get_viewdef` would lock
 * each view in turn, and deadlock with a run re-creating them.
 */
export async function postgresViewsCurrent(db: Pool | PoolClient, schema: string, planned: PlannedViews): Promise<boolean> {
  const names = [...planned.create.map((view) => view.name), ...planned.absent];
  const { rows } = await db.query<{ name: string; version: string | null; note: string | null }>(viewMarkStatements.read, [schema, names]);
  const found = new Map(rows.map((row) => [row.name, row]));
  if (planned.absent.some((name) => found.has(name))) return false;
  return planned.create.every((view) => {
    const row = found.get(view.name);
    return row?.version != null && row.note === mark(view.select, row.version);
  });
}

/** Marks the views just made from `planned` (in the caller's transaction): what `postgresViewsCurrent` compares. */
export async function markPostgresViews(client: PoolClient, schema: string, planned: PlannedViews, quoted: (name: string) => string): Promise<void> {
  const { rows } = await client.query<{ name: string; version: string | null }>(viewMarkStatements.read, [schema, planned.create.map((view) => view.name)]);
  const versions = new Map(rows.map((row) => [row.name, row.version]));
  for (const view of planned.create) {
    const version = versions.get(view.name);
    if (version != null) await client.query(viewMarkStatements.mark(quoted(view.name), mark(view.select, version)));
  }
}

const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 24);
const mark = (select: string, version: string) => `webdata-etl ${hash(select)} ${version}`;
