import type { Series } from '../pipeline/page.ts';
import type { SourcePlan } from '../sources/source.ts';

/** Series asked of the store, and recorded, at a time: a plan of a million series is never held at once. */
export const SLICE = 500;

/**
 * The plan's series, `SLICE` at a time, each slice handed to `each` before the next is read: what the run's close
 * records of them (outcomes, tracked ranks) asks the store one statement per slice, never one per series.
 */
export async function forEachSlice(plan: SourcePlan, each: (slice: readonly Series[]) => Promise<void>): Promise<void> {
  let slice: Series[] = [];
  for (const series of plan.series()) {
    slice.push(series);
    if (slice.length < SLICE) continue;
    await each(slice);
    slice = [];
  }
  if (slice.length > 0) await each(slice);
}
