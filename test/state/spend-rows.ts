import type { SpendRow } from '../../src/state/spend-store.ts';

/** A spend row as the ledger's tests write it: a 2xx of one credit to the search endpoint, `overrides` aside. */
export function spendRowOf(overrides: Partial<SpendRow> = {}): SpendRow {
  return {
    runId: 'run-1',
    at: new Date().toISOString(),
    seriesId: 's',
    path: '/searchengine/search',
    attempt: 1,
    status: '200',
    credits: 1,
    uncertain: false,
    latencyMs: 1,
    pipeline: 'p',
    ...overrides,
  };
}
