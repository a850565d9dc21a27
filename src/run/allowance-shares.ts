import type { Pipeline } from '../config/define.ts';
import { occurrenceAt, occurrencesLeft, shareOf } from '../recurring/allowance-share.ts';
import { occurrencesOf } from '../recurring/occurrences.ts';
import { describeAllowance, type Allowance } from '../schedule/allowance.ts';
import { periodAt } from '../schedule/allowance-period.ts';
import type { AllowanceStore } from '../state/allowance-store.ts';
import type { OccurrenceStore } from '../state/occurrence-store.ts';
import type { KeyBook } from './allowances.ts';

/** One key's share of this occurrence (docs/credits.md#spreading-an-allowance). */
export interface KeyShare {
  /** The occurrence's share: what was left when it came, over the occurrences left, this one included. */
  share: number;
  /** What this invocation may still spend of it: the share less what the run spent since the occurrence was due. */
  cap: number;
  /** Credits of the period left (not spent, not held) as the run opens. */
  left: number;
  /** What the run spent of the key's period since its occurrence was due (an earlier invocation's, resumed). */
  spent: number;
  /** The occurrences left in the period, this one included. */
  occurrences: number;
  period: string;
  /** The sentence the run's start says of it. */
  note: string;
}

/**
 * Each key's share of this occurrence, for the keys whose allowance this pipeline spreads (`spread: 'even'`, its
 * own or the run's): what is left of the key's period, by the store's clock, divided by the schedule's occurrences
 * left in it, this one included (the latest due at or before now, else a run by hand before the period's first
 * occurrence). A share, not a reservation: other pipelines on the key spend from what is left as they run, and each
 * takes its own share of what they left.
 *
 * A run resumed in the same occurrence (killed, or stopped and started again) keeps its share, no more: what it
 * already spent of the period since the occurrence was due (the ledger's rows of the run, by their `at`) is counted
 * back into what was left, and taken off what it may still spend — so that resuming never hands it a second share.
 */
export async function allowanceShares(
  store: AllowanceStore & Pick<OccurrenceStore, 'storeClock'>,
  book: KeyBook,
  run: { pipeline: Pipeline; allowance: Allowance | undefined; runId: string },
): Promise<Map<string, KeyShare>> {
  const shares = new Map<string, KeyShare>();
  const { pipeline, allowance, runId } = run;
  const schedule = pipeline.schedule;
  // A pipeline without a schedule has no spread (refused before: allowance.spread names the field).
  if (schedule === undefined) return shares;
  const spread = [...book.allowances].filter(([label]) => (pipeline.keys?.[label]?.allowance ?? allowance)?.spread === 'even');
  if (spread.length === 0) return shares;
  const occurrences = occurrencesOf(schedule);
  const now = await store.storeClock();
  for (const [label, recorded] of spread) {
    const period = periodAt(now, recorded.per, recorded.timezone);
    const since = occurrenceAt(occurrences, now, period) ?? period.start;
    const fingerprint = book.fingerprints.get(label) as string;
    const usage = await store.allowanceUsage({ fingerprint, period: period.key, runId, since: new Date(since).toISOString() });
    const left = Math.max(0, recorded.credits - usage.spent - usage.held);
    // What this occurrence had to share: what is left, with what the run already took of it.
    const before = left + usage.runSpent;
    const counted = occurrencesLeft(occurrences, now, period.end, before + 1);
    const share = shareOf(before, counted.count);
    const cap = Math.max(0, share - usage.runSpent);
    const many = `${counted.exact ? '' : 'about '}${counted.count} occurrence${counted.count === 1 ? '' : 's'}`;
    const already = usage.runSpent > 0 ? `; the run spent ${usage.runSpent} of it since the occurrence was due, ${cap} to go` : '';
    const note =
      `key "${label}": this occurrence's share is ${share} credit${share === 1 ? '' : 's'} ` +
      `(${before} left of ${describeAllowance(recorded)} for ${period.key}, spread over ${many} left, this one included${already})`;
    shares.set(label, { share, cap, left, spent: usage.runSpent, occurrences: counted.count, period: period.key, note });
  }
  return shares;
}
