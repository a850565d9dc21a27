// A page's commit takes the spend of the answers for it, not the next page's: a series asks for page n + 1 once page n
// is answered, so page n + 1's answer may come while page n is still on its way to its commit. Taken with page n, it
// was counted committed even when page n + 1 never committed (the run failed first): `credits.uncommitted` read short.
import { expect, it } from 'vitest';
import { SpendLedger } from '../../src/run/spend-ledger.ts';
import type { SpendRow, SpendStore } from '../../src/state/spend-store.ts';

const row = (seriesId: string, attempt = 1): SpendRow => ({
  runId: 'r', at: '2026-11-28T00:00:00.000Z', seriesId, path: '/searchengine/search', attempt, status: '200', credits: 1, uncertain: false, latencyMs: 5,
});

it('a page takes the answers for it and before it; a later page keeps its own, written uncommitted if it never commits', async () => {
  const written: SpendRow[] = [];
  const store: SpendStore = { spend: async (rows) => void written.push(...rows), spendOf: async () => ({}) as never };
  const ledger = new SpendLedger(store);
  await ledger.record(row('a'), 1);
  await ledger.record(row('a'), 2);
  await ledger.record(row('b'), 1);
  // Page 1 of `a` commits with page 2 already answered: it takes its own answer only.
  expect(ledger.take('a', 1)).toHaveLength(1);
  // An answer not told its page (a source of one's own that does not say) goes with the next page of its series.
  await ledger.record(row('b'));
  expect(ledger.take('b', 1)).toHaveLength(2);
  // The run fails before page 2 of `a` commits: its answer is written, paid and not committed.
  await ledger.flush();
  expect(written).toEqual([{ ...row('a'), uncommitted: true }]);
});

it('a page taken again after a retry takes what is left for it, and nothing twice', async () => {
  const ledger = new SpendLedger({ spend: async () => undefined, spendOf: async () => ({}) as never });
  await ledger.record(row('a', 1), 3);
  await ledger.record(row('a', 2), 3);
  await ledger.record(row('a', 1), 4);
  expect(ledger.take('a', 3).map((r) => r.attempt)).toEqual([1, 2]);
  expect(ledger.take('a', 3)).toEqual([]);
  expect(ledger.take('a', 4)).toHaveLength(1);
});
