// The dashboard queries of docs/observability.md stay true: its PromQL parses (promtool), and its SQL answers rows
// against a PostgreSQL that holds two runs of a pipeline (the sink's views and the state store's tables).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { normalize, searchPages, toPostgres } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { runOn } from '../pipeline-helpers.ts';

const DOC = readFileSync(new URL('../../docs/observability.md', import.meta.url), 'utf8');
const blocks = (language: string) => [...DOC.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((match) => match[1] ?? '');
const promtoolAvailable = (() => {
  try {
    execFileSync('promtool', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// Under CI a missing promtool fails the test (.ci/run installs Debian's prometheus); elsewhere it is skipped.
describe.skipIf(!promtoolAvailable && process.env.CI !== 'true')('the dashboard\'s PromQL', () => {
  it('parses: each query as a recording rule that promtool accepts', () => {
    const queries = blocks('promql').map((block) =>
      block
        .split('\n')
        .filter((line) => !line.trimStart().startsWith('#'))
        .join(' ')
        .replaceAll('$__rate_interval', '5m')
        .replaceAll('$__range', '1h')
        .trim(),
    );
    expect(queries.length).toBeGreaterThanOrEqual(10);
    const dir = mkdtempSync(join(tmpdir(), 'webdata-promql-'));
    try {
      const rules = { groups: [{ name: 'dashboard', rules: queries.map((expr, i) => ({ record: `dashboard:query${i}`, expr })) }] };
      // JSON is YAML.
      writeFileSync(join(dir, 'rules.yml'), JSON.stringify(rules));
      expect(execFileSync('promtool', ['check', 'rules', join(dir, 'rules.yml')], { encoding: 'utf8' })).toContain(`SUCCESS: ${queries.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describePostgres('the dashboard\'s SQL', () => {
  it('answers rows against two runs of a pipeline in PostgreSQL (sink in public, state in webdata)', async () => {
    const db = await testDatabase();
    try {
      // Drift: every answer a little different, so that the second run has changes.
      await using sim = await simulator({ seed: 31, driftEveryMs: 1 });
      const pipeline = {
        name: 'rank-tracking',
        source: searchPages({ queries: ['espresso machine', 'standing desk'], countries: ['us', 'gb', 'de'], maxPages: 2 }),
        stages: [normalize()],
        sinks: [toPostgres({ url: db.url, table: 'results' })],
      };
      for (let i = 0; i < 2; i++) expect((await runOn(sim, pipeline, { stateUrl: db.url })).status).toBe('completed');
      const queries = blocks('sql');
      expect(queries.length).toBeGreaterThanOrEqual(6);
      for (const query of queries) {
        const text = query
          .replaceAll(/\$__timeFilter\(([^)]+)\)/g, "$1 BETWEEN now() - interval '1 day' AND now() + interval '1 hour'")
          .replaceAll('${query:sqlstring}', "'espresso machine'")
          .replaceAll('${country:sqlstring}', "'us'");
        const rows = await sql(db.url, text);
        expect(rows.length, query).toBeGreaterThan(0);
      }
    } finally {
      await db.drop();
    }
  });
});
