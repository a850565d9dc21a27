import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { migrate } from '../../src/state/postgres/schema.ts';
import { testDatabase } from '../postgres/pg.ts';

/**
 * A test database migrated to `schema` for the describe block this is called in, and pools on it (a worker's
 * connections of its own) closed after the block: the shared limits' tests, which write the run's rows themselves.
 */
export function migratedDatabase(schema: string): { readonly url: string; pool(max?: number): pg.Pool } {
  let db: Awaited<ReturnType<typeof testDatabase>> | undefined;
  const pools: pg.Pool[] = [];
  const url = (): string => {
    if (!db) throw new Error('the test database is made in beforeAll');
    return db.url;
  };
  const pool = (max = 4): pg.Pool => {
    const opened = new pg.Pool({ connectionString: url(), max });
    opened.on('error', () => undefined);
    pools.push(opened);
    return opened;
  };
  beforeAll(async () => {
    db = await testDatabase();
    await migrate(pool(1), schema, 'test');
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await db?.drop();
  });
  return {
    get url() {
      return url();
    },
    pool,
  };
}
