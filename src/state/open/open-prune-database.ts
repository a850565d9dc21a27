import type { PostgresTarget } from '../../postgres/target.ts';
import { postgresPruneDatabase } from '../postgres/prune.ts';
import type { PruneDatabase } from '../prune.ts';
import { sqlitePruneDatabase } from '../sqlite/prune.ts';

/** A state database as `prune` sees it: a SQLite file, or a PostgreSQL schema (the choice of store made here, as `openStateStore`'s). */
export function openPruneDatabase(place: { kind: 'sqlite'; path: string } | { kind: 'postgres'; target: PostgresTarget; schema: string }): Promise<PruneDatabase> {
  return place.kind === 'sqlite' ? Promise.resolve(sqlitePruneDatabase(place.path)) : postgresPruneDatabase(place.target, place.schema);
}
