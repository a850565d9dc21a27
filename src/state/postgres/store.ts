import { atDatabase } from '../../postgres/failure.ts';
import type { Pool } from '../../postgres/pools.ts';
import type { PostgresTarget } from '../../postgres/target.ts';
import type { StateStore } from '../interfaces.ts';
import { postgresAllowances } from './allowances.ts';
import { postgresLimits } from './limits.ts';
import { postgresNotifications } from './notifications.ts';
import { postgresOccurrences } from './occurrences.ts';
import { postgresPageCommits, type SeriesFence } from './page-commits.ts';
import { postgresRuns } from './runs.ts';
import { migrate } from './schema.ts';
import { postgresSpend } from './spend.ts';
import { runStatements } from './statements.ts';
import { type StoreParts, storeParts, storeQuery } from './store-parts.ts';

export type { SeriesFence } from './page-commits.ts';

export interface PostgresStateStore extends StateStore {
  readonly kind: 'postgres';
  readonly pool: Pool;
  readonly schema: string;
  /**
   * The same store as a worker of a distributed run commits to it (docs/design.md#the-run-host), behind `fence`: a
   * page commits only if its series is still where this worker left it (else `SeriesLostError`, and nothing is
   * written), the journal takes the next number whoever commits, and a series' end completes its job (`finish`,
   * false: the job is no longer this worker's) in the same transaction. This store itself is left as it was.
   */
  fenced(fence: SeriesFence): StateStore;
}

/**
 * The run-state store in PostgreSQL (docs/design.md#the-state-store), the same tables as SQLite's under one schema
 * (default `webdata`), created and migrated here, one module per role: runs and pages (`runs.ts`, a page's commit and
 * a series' end in `page-commits.ts`), notifications, occurrences, spend, keys' limits and allowances. Unlike a SQLite file, one schema serves many
 * pipelines: everything a run writes carries its pipeline, and the lease is one pipeline's. A page commits as one
 * statement, with the rows of PostgreSQL sinks on the same database in it (`page-statement.ts`).
 */
export async function postgresStateStore(pool: Pool, target: PostgresTarget, options: { schema: string; pipeline: string }): Promise<PostgresStateStore> {
  const parts = storeParts(pool, target, options);
  await atDatabase(parts.where, () => migrate(pool, parts.schema, target.label), pool);
  // The pipeline's row: its journal sequence.
  await storeQuery(parts, runStatements(parts.s).addPipeline, [parts.pipeline]);
  return compose(parts);
}

function compose(parts: StoreParts): PostgresStateStore {
  const store: PostgresStateStore = {
    kind: 'postgres',
    pool: parts.pool,
    schema: parts.schema,
    ...postgresRuns(parts),
    ...postgresPageCommits(parts),
    ...postgresNotifications(parts),
    ...postgresOccurrences(parts),
    ...postgresSpend(parts),
    ...postgresLimits(parts),
    ...postgresAllowances(parts),
    fenced: (fence) => ({ ...store, ...postgresPageCommits(parts, fence) }),
  };
  return store;
}
