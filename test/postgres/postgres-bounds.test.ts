import { expect, it } from 'vitest';
import { openPool } from '../../src/postgres/pools.ts';
import { postgresTimeouts } from '../../src/postgres/timeouts.ts';
import { postgresTarget } from '../../src/postgres/target.ts';
import { describePostgres, testDatabase } from './pg.ts';

// Every wait on PostgreSQL is bounded (src/postgres/pools.ts). node-postgres lets a connection string's parameters
// override the options given beside it, so a URL — a pipeline file's — could switch the bounds off.

describePostgres('the bounded waits hold whatever the URL says', () => {
  it('?statement_timeout=0&idle_in_transaction_session_timeout=0&query_timeout=0, or -c in ?options=, leave our bounds in force (they unbounded them)', async () => {
    const db = await testDatabase();
    const url = new URL(db.url);
    url.searchParams.set('statement_timeout', '0');
    url.searchParams.set('idle_in_transaction_session_timeout', '0');
    url.searchParams.set('query_timeout', '0');
    url.searchParams.set('options', '-c statement_timeout=0 -c search_path=elsewhere');
    url.searchParams.set('application_name', 'mine');
    const pool = openPool(postgresTarget(url.toString(), {}), 1);
    try {
      const client = await pool.connect();
      try {
        const [row] = (
          await client.query<{ statement: string; idle: string; path: string; name: string }>(
            `SELECT current_setting('statement_timeout') AS statement, current_setting('idle_in_transaction_session_timeout') AS idle,
                    current_setting('search_path') AS path, current_setting('application_name') AS name`,
          )
        ).rows;
        const bounds = postgresTimeouts({});
        expect(row?.statement).toBe(`${bounds.statement / 60_000}min`);
        expect(row?.idle).toBe(`${bounds.idleInTransaction / 60_000}min`);
        // The client's own wait for a reply (never sent to the server).
        expect((client as unknown as { connectionParameters: { query_timeout: unknown } }).connectionParameters.query_timeout).toBe(bounds.query);
        // What is not a bound is the URL's to say, as before.
        expect(row?.path).toBe('elsewhere');
        expect(row?.name).toBe('mine');
      } finally {
        client.release();
      }
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
