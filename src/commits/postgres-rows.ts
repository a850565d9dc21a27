import type { PostgresRows } from './page-writes.ts';
import { claimedKeys, postgresCheckpointUpdate, postgresRowsInsert } from './statements.ts';

/**
 * A PostgreSQL statement being built of data-modifying CTEs (one round trip, atomic on its own): the state store's
 * page statement, or a sink's own. Each part applies only where `guard` holds — when the page took its place — so that
 * a refused page writes nothing.
 */
export interface PageStatement {
  /** Adds a parameter; returns its placeholder (`$n`). */
  p(value: unknown): string;
  /** Adds a data-modifying CTE (an insert, an update). */
  add(sql: string): void;
  /** A condition that holds only when the page took its place. */
  readonly guard: string;
  /**
   * The page's journal number as SQL, when the store assigns it in the statement (a worker of a distributed run, where
   * pages of many workers interleave); absent, it is the number the page was given.
   */
  readonly seq?: string;
  /**
   * The dedupe keys this statement claimed for the run, as SQL (`(SELECT key FROM …)`), when a distributed run's dedupe
   * looks across series: another worker may have claimed a key the page's stages took as new, and the rows then written
   * are only those whose `dedupe_key` is NULL or claimed here.
   */
  readonly claimed?: string;
}

/**
 * A page's rows for a PostgreSQL table and the sink's checkpoint, as parts of `statement`: one INSERT of every row
 * (arrays unnested, one parameter per column) and one UPDATE of the checkpoint, each under the statement's guard.
 */
export function addRows(statement: PageStatement, rows: PostgresRows, seq: number): void {
  const guard = ` AND ${statement.guard}`;
  const length = rows.arrays[0]?.length ?? 0;
  if (length > 0) {
    const key = rows.keyColumn;
    // A distributed run's page writes only the rows whose key it claimed (another worker may hold the others).
    const claimed = statement.claimed === undefined || key < 0 ? '' : claimedKeys(key, statement.claimed);
    const arrays = rows.arrays.map((array, i) => `${statement.p(array)}::${rows.types[i]}[]`);
    statement.add(postgresRowsInsert(rows, arrays, `${guard}${claimed}`));
  }
  const at = statement.seq ?? `${statement.p(seq)}::bigint`;
  statement.add(postgresCheckpointUpdate(rows, at, statement.p(rows.checkpoint.pipeline), statement.p(rows.sinkId), guard));
}
