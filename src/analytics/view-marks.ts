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
 * was made from and the hash of the definition PostgreSQL kept of it then (`markPostgresViews`). A view made from
 * other SQL (another version of webdata-etl, another set of the table's columns), replaced since by anyone, or left
 * unmarked, is not current; nor is a name in `absent` that is a view. `locked`: read under the views' advisory lock.
 */
export async function postgresViewsCurrent(db: Pool | PoolClient, schema: string, planned: PlannedViews, locked: boolean): Promise<boolean> {
  const names = [...planned.create.map((view) => view.name), ...planned.absent];
  let rows: { name: string; definition: string; note: string | null }[];
  try {
    ({ rows } = await db.query<{ name: string; definition: string; note: string | null }>(viewMarkStatements.read, [schema, names]));
  } catch (error) {
    // Read without the views' lock, a view another run is dropping that moment fails pg_get_viewdef ("cache lookup
    // failed"): not current, and the locked path reads again after that run.
    if (!locked) return false;
    throw error;
  }
  const found = new Map(rows.map((row) => [row.name, row]));
  if (planned.absent.some((name) => found.has(name))) return false;
  return planned.create.every((view) => {
    const row = found.get(view.name);
    return row !== undefined && row.note === mark(view.select, row.definition);
  });
}

/** Marks the views just made from `planned` (in the caller's transaction): what `postgresViewsCurrent` compares. */
export async function markPostgresViews(client: PoolClient, schema: string, planned: PlannedViews, quoted: (name: string) => string): Promise<void> {
  const { rows } = await client.query<{ name: string; definition: string }>(viewMarkStatements.read, [schema, planned.create.map((view) => view.name)]);
  const definitions = new Map(rows.map((row) => [row.name, row.definition]));
  for (const view of planned.create) {
    const definition = definitions.get(view.name);
    if (definition !== undefined) await client.query(viewMarkStatements.mark(quoted(view.name), mark(view.select, definition)));
  }
}

const hash = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 24);
const mark = (select: string, definition: string) => `webdata-etl ${hash(select)} ${hash(definition)}`;
