// A run's keys' limits recalled from the state store and kept (src/run/remembered-limits.ts): by fingerprint, never by
// label or key; trusted for 7 days; only what a run measured itself kept, so that an old limit is not refreshed by a
// run that merely ran at it.
import { describe, expect, it } from 'vitest';
import { keyFingerprint } from '../../src/client/api-keys.ts';
import { openDatabase } from '../../src/open-database.ts';
import { recallLimits, TRUSTED_FOR_MS } from '../../src/run/remembered-limits.ts';
import type { KeyStats } from '../../src/schedule/types.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

const API = 'http://127.0.0.1:9/api/v1';
const KEYS = new Map([
  ['a', 'sk_recall_a_0123456789'],
  ['b', 'sk_recall_b_0123456789'],
]);
const identities = { api: API, fingerprints: (secret: Uint8Array) => new Map([...KEYS].map(([label, key]) => [label, keyFingerprint(key, secret)])) };
const stats = (label: string, known: KeyStats['known']): KeyStats => ({ label, requests: 10, rateLimited: 0, credits: 10, rate: 1, learnedLimit: null, concurrency: 1, retired: null, known, allowance: null });

describe('limits recalled and kept', () => {
  it('a limit younger than 7 days is trusted, an older one a first guess; only what a run measured is kept, by fingerprint', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    try {
      const store = sqliteStateStore(db);
      let now = Date.parse('2026-11-01T00:00:00Z');
      const first = await recallLimits(store, identities, () => now);
      expect(first.starts.size).toBe(0);
      await first.keep([stats('a', { rate: 9.5, above: 10.4, measured: true }), stats('b', { rate: 4, above: 4.2, measured: false })]);
      const rows = sqliteRows(dir.path('state.sqlite'), 'SELECT * FROM key_limits');
      expect(rows).toEqual([{ fingerprint: expect.stringMatching(/^[\w-]{22}$/), api: API, rate: 9.5, above: 10.4, learned_at: '2026-11-01T00:00:00.000Z' }]);
      for (const key of KEYS.values()) expect(JSON.stringify(rows)).not.toContain(key);

      now += TRUSTED_FOR_MS - 1;
      const fresh = await recallLimits(store, identities, () => now);
      expect([...fresh.starts]).toEqual([['a', { rate: 9.5, above: 10.4, trusted: true }]]);
      // A run that only ran at it keeps its age.
      await fresh.keep([stats('a', { rate: 9.5, above: 10.4, measured: false })]);
      now += 2;
      const old = await recallLimits(store, identities, () => now);
      expect([...old.starts]).toEqual([['a', { rate: 9.5, above: 10.4, trusted: false }]]);
      // The same keys at another API: nothing (a key's limit is its service's).
      const elsewhere = await recallLimits(store, { ...identities, api: 'https://api.example.com/api/v1' }, () => now);
      expect(elsewhere.starts.size).toBe(0);
    } finally {
      db.close();
    }
  });

  it('a row that is no start (tampered, or a rate of 0) is as none: the key learns again, the run does not fail on it; nothing unmeasurable is kept', async () => {
    using dir = workdir();
    const db = openDatabase(dir.path('state.sqlite'));
    try {
      const store = sqliteStateStore(db);
      const now = Date.parse('2026-11-01T00:00:00Z');
      await (await recallLimits(store, identities, () => now)).keep([stats('a', { rate: 9.5, above: 10.4, measured: true }), stats('b', { rate: 4, above: 4.2, measured: true })]);
      // What a hand, or another program, may leave in the file: text, zero, a rate above its own failure.
      db.prepare(`UPDATE key_limits SET rate = 'fast' WHERE rate = 9.5`).run();
      db.prepare('UPDATE key_limits SET above = 1 WHERE rate = 4').run();
      expect((await recallLimits(store, identities, () => now)).starts.size).toBe(0);
      db.prepare(`UPDATE key_limits SET rate = 0, above = NULL`).run();
      expect((await recallLimits(store, identities, () => now)).starts.size).toBe(0);
      // A knowledge of no rate is not kept.
      await (await recallLimits(store, identities, () => now)).keep([stats('a', { rate: Number.NaN, above: null, measured: true })]);
      expect(sqliteRows(dir.path('state.sqlite'), 'SELECT rate FROM key_limits ORDER BY rate')).toEqual([{ rate: 0 }, { rate: 0 }]);
    } finally {
      db.close();
    }
  });
});
