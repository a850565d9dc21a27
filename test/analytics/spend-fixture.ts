// What the tests of where the credits went share (webdata_spend, `spend`, the report's panel, `estimate`): a simulator
// that knows two keys, pipelines sharing a state database, and spend written through a store as runs write it.
import { normalize, searchPages, toCsv } from '../../src/index.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import type { StateStore } from '../../src/state/interfaces.ts';
import type { SpendRow } from '../../src/state/spend-store.ts';
import { spendRowOf } from '../state/spend-rows.ts';

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

export type Row = Record<string, unknown>;

/** 23:30 UTC on 26 November: the 27th in Berlin. */
export const LATE = '2026-11-26T23:30:00.000Z';

export const spendRow = (runId: string, pipeline: string | undefined, key: SpendRow['key'], credits: number, at = LATE): SpendRow => {
  const { pipeline: _none, ...row } = spendRowOf({ runId, key, credits, at });
  return pipeline === undefined ? row : { ...row, pipeline };
};

/**
 * Spend written through the store as runs write it, a key's allowance and holds: `north`, 100 credits a day in Berlin,
 * spent by alpha (as `north`) and beta (which labels the same key `n2`) in the period the store's clock is in, and in
 * an earlier one; `south`, without an allowance; and a row of a run from before the ledger named pipelines and keys.
 * `expiredHold` writes a hold its holder stopped renewing, which counts for nothing. Resolves to today's period.
 */
export async function allowanceSpend(store: StateStore, expiredHold: (period: string) => Promise<void>): Promise<string> {
  const north = { fingerprint: 'fp-north', label: 'north' };
  await store.declareAllowance({ ...north, pipeline: 'alpha', allowance: { credits: 100, per: 'day', timezone: 'Europe/Berlin' } });
  const h1 = await store.holdAllowance({ fingerprint: 'fp-north', holder: 'h1', pipeline: 'alpha', runId: 'run-a', want: 20, ttlMs: 600_000 });
  const period = h1?.period.key as string;
  await store.spend([1, 1, 1].map((credits) => spendRow('run-a', 'alpha', { ...north, period, holder: 'h1' }, credits)));
  await store.holdAllowance({ fingerprint: 'fp-north', holder: 'h2', pipeline: 'beta', runId: 'run-b', want: 10, ttlMs: 600_000 });
  await store.spend([2, 2].map((credits) => spendRow('run-b', 'beta', { fingerprint: 'fp-north', label: 'n2', period, holder: 'h2' }, credits)));
  await store.spend([spendRow('run-a', 'alpha', { ...north, period: '2026-01-01', holder: null }, 5, '2026-01-01T10:00:00.000Z')]);
  await store.spend([spendRow('run-a', 'alpha', { fingerprint: 'fp-south', label: 'south', period: null, holder: null }, 4)]);
  await store.startRun({ runId: 'run-old', pipeline: 'legacy', startedAt: LATE, fingerprint: 'f', plan: {}, budget: null });
  await store.spend([spendRow('run-old', undefined, undefined, 1)]);
  await expiredHold(period);
  return period;
}

/** What webdata_spend says of `allowanceSpend`'s rows. */
export function expectedAllowanceRows(period: string): Row[] {
  const north = { allowance_credits: 100, allowance_per: 'day', allowance_timezone: 'Europe/Berlin' };
  const none = { allowance_credits: null, allowance_per: null, allowance_timezone: null, period: null, period_spent: null, period_held: null, period_left: null };
  // Today: 3 + 4 spent by the two pipelines; held, 17 of h1's 20 and 6 of h2's 10; left, 100 - 7 - 23.
  const today = { ...north, period, period_spent: 7, period_held: 23, period_left: 70 };
  const row = (pipeline: string | null, label: string | null, fingerprint: string | null, day: string, runId: string, requests: number, credits: number) => ({
    day,
    key_label: label,
    key_fingerprint: fingerprint,
    pipeline,
    run_id: runId,
    requests,
    answered: requests,
    credits,
    uncertain_credits: 0,
  });
  return [
    { ...row('alpha', 'north', 'fp-north', '2026-01-01', 'run-a', 1, 5), ...north, period: '2026-01-01', period_spent: 5, period_held: 0, period_left: 95 },
    { ...row('alpha', 'north', 'fp-north', '2026-11-27', 'run-a', 3, 3), ...today },
    { ...row('alpha', 'south', 'fp-south', '2026-11-26', 'run-a', 1, 4), ...none },
    { ...row('beta', 'n2', 'fp-north', '2026-11-27', 'run-b', 2, 4), ...today },
    // Its pipeline is its run's; its day UTC's.
    { ...row('legacy', null, null, '2026-11-26', 'run-old', 1, 1), ...none },
  ];
}

