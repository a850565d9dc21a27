// Where the credits went (docs/credits.md#where-the-credits-went): the spend ledger by key, pipeline and run, and the
// `webdata_spend` view over it, after real runs against the simulator — two pipelines sharing a state database, each
// sending with a pool of two keys — in SQLite and in PostgreSQL.
import { describe, expect, it } from 'vitest';
import { normalize, run, searchPages, toCsv } from '../../src/index.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

export const KEYS = { north: 'sk_north_4f3e2d1c0b9a8f7e6d', south: 'sk_south_0a9b8c7d6e5f4a3b2c' };
export const POOL = `north=${KEYS.north},south=${KEYS.south}`;

/** A simulator that knows both keys (each its own name, so that it counts each one's credits). */
export function poolSimulator() {
  return startSimulator({ keys: [{ key: KEYS.north, name: 'north' }, { key: KEYS.south, name: 'south' }] });
}

/** A pipeline of its own name and queries, whose state is `state` (a SQLite file, or PostgreSQL's `state.url`). */
export function pipelineOf(name: string, dir: string, state: { path: string } | { url: string }, queries: string[]) {
  return {
    name,
    source: searchPages({ queries, countries: ['us', 'gb'], maxPages: 2 }),
    stages: [normalize()],
    sinks: [toCsv({ path: `${dir}/${name}.csv` })],
    rate: { concurrency: 2 },
    state,
  };
}

/** The simulator's own count of credits debited, by key name. */
export function debited(sim: { stats(): { credits: Record<string, { debited: number }> } }): Record<string, number> {
  return Object.fromEntries(Object.entries(sim.stats().credits).map(([name, { debited }]) => [name, debited]));
}

describe('the spend ledger by key and pipeline (SQLite state)', () => {
  it("every row names its pipeline and its key's label and fingerprint (never the key); credits per label are the simulator's", async () => {
    await using sim = await poolSimulator();
    using dir = workdir();
    const state = { path: dir.path('state.sqlite') };
    const summary = await run(pipelineOf('alpha', dir.dir, state, ['espresso', 'kettle', 'grinder']), { baseUrl: sim.url, env: { WEBDATA_API_KEYS: POOL } });
    expect(summary.status).toBe('completed');
    const rows = sqliteRows(state.path, 'SELECT pipeline, key_label, key_fingerprint, SUM(credits) AS credits FROM spend GROUP BY pipeline, key_label, key_fingerprint ORDER BY key_label');
    expect(rows.map((row) => [row.pipeline, row.key_label, row.credits])).toEqual([
      ['alpha', 'north', debited(sim).north],
      ['alpha', 'south', debited(sim).south],
    ]);
    // A keyed hash under the file's secret: 22 base64url characters, one per key, neither key in it.
    for (const row of rows) expect(row.key_fingerprint).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(new Set(rows.map((row) => row.key_fingerprint)).size).toBe(2);
  });
});
