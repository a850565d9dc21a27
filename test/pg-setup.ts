import type { TestProject } from 'vitest/node';
import { type Cluster, postgresBin, startCluster } from './pg-cluster.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A URL where the tests may CREATE DATABASE, or null: the PostgreSQL suites are then skipped. */
    postgresAdminUrl: string | null;
  }
}

/**
 * The PostgreSQL the tests use: WEBDATA_TEST_DATABASE_URL when set, else a throwaway cluster started here and removed
 * at the end. Without either, the PostgreSQL suites are skipped with one line saying how to enable them — except under
 * CI=true, where that fails the run.
 */
export default async function setup(project: TestProject): Promise<(() => void) | undefined> {
  const given = process.env.WEBDATA_TEST_DATABASE_URL;
  if (given) {
    project.provide('postgresAdminUrl', given);
    return undefined;
  }
  const bin = postgresBin();
  if (!bin) {
    const how = "install Debian's postgresql (apt-get install postgresql), or set WEBDATA_TEST_DATABASE_URL to a server where the tests may create databases";
    if (process.env.CI === 'true') throw new Error(`PostgreSQL is needed under CI=true: ${how}`);
    console.warn(`PostgreSQL suites skipped: no PostgreSQL found. To run them, ${how}.`);
    project.provide('postgresAdminUrl', null);
    return undefined;
  }
  const cluster: Cluster = await startCluster(bin);
  project.provide('postgresAdminUrl', cluster.url);
  return () => cluster.destroy();
}
