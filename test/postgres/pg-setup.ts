import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { type Cluster, postgresBin, startCluster } from './pg-cluster.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A URL where the tests may CREATE DATABASE, or null: the PostgreSQL suites are then skipped. */
    postgresAdminUrl: string | null;
  }
}

const HOW = "install Debian's postgresql (apt-get install postgresql), or set WEBDATA_TEST_DATABASE_URL to a server where the tests may create databases";

/**
 * The PostgreSQL the tests use: WEBDATA_TEST_DATABASE_URL when set, else a throwaway cluster started here and removed
 * at the end. Without either, the PostgreSQL suites are skipped with one line saying how to enable them — except under
 * CI=true, where that fails the run.
 */
export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  const bin = postgresBin();
  const given = process.env.WEBDATA_TEST_DATABASE_URL;
  if (given) {
    await checkGiven(given);
    // The restart tests stop and start a server of their own, which needs the binaries even with a server given.
    if (!bin) console.warn("PostgreSQL restart tests skipped: they start a cluster of their own from the machine's binaries (install Debian's postgresql).");
    project.provide('postgresAdminUrl', given);
    return undefined;
  }
  if (!bin) {
    if (process.env.CI === 'true') throw new Error(`PostgreSQL is needed under CI=true: ${HOW}`);
    console.warn(`PostgreSQL suites skipped: no PostgreSQL found. To run them, ${HOW}.`);
    project.provide('postgresAdminUrl', null);
    return undefined;
  }
  const cluster: Cluster = await startCluster(bin);
  project.provide('postgresAdminUrl', cluster.url);
  return () => cluster.destroy();
}

/**
 * A wrong WEBDATA_TEST_DATABASE_URL fails the run here, once and clearly, rather than every PostgreSQL test on its own.
 * It was asked for, so it is not skipped even outside CI. The message names the URL without its password.
 */
async function checkGiven(given: string): Promise<void> {
  const named = `WEBDATA_TEST_DATABASE_URL (${redacted(given)})`;
  const client = new pg.Client({ connectionString: given, connectionTimeoutMillis: 15_000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ role: string; may: boolean }>(
      'SELECT current_user AS role, rolsuper OR rolcreatedb AS may FROM pg_roles WHERE rolname = current_user',
    );
    if (rows[0]?.may !== true) throw new Error(`${named}: role ${rows[0]?.role ?? '?'} may not CREATE DATABASE, which every test does for a database of its own`);
  } catch (error) {
    if (error instanceof Error && error.message.startsWith(named)) throw error;
    throw new Error(`${named}: cannot connect: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function redacted(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'not a URL';
  }
}
