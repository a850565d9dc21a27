import { CLAIM_AHEAD_TOLERANCE_MS } from '../state/occurrence-store.ts';

/**
 * What is wrong with an occurrence's claim, if anything (docs/schedules.md#clocks): it was claimed before it was due
 * by the store's clock (a claim's time is the store's), or it is due still in the future and claimed already. A
 * worker whose clock ran ahead made it — of a version that did not keep the store's time, or on a machine whose clock
 * was set ahead and back (SQLite, which has no clock but the machine's). Named by its worker: whose clock to set right.
 * `now`: the reader's time, for the second kind.
 */
export function claimAnomaly(occurrence: { dueAt: string; claimedAt: string; worker: string | null }, now: number): string | undefined {
  const due = Date.parse(occurrence.dueAt);
  const early = due - Date.parse(occurrence.claimedAt);
  const by = `by worker ${occurrence.worker ?? '(unknown)'}`;
  if (early > CLAIM_AHEAD_TOLERANCE_MS) return `anomaly: claimed ${Math.round(early / 1000)} s before it was due, ${by} (its clock was ahead of the state store's)`;
  if (due - now > CLAIM_AHEAD_TOLERANCE_MS) return `anomaly: due in ${Math.round((due - now) / 1000)} s and claimed already, ${by} (its clock was ahead)`;
  return undefined;
}
