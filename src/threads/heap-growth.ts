import { setFlagsFromString } from 'node:v8';

/**
 * How far past its live set V8 lets a heap of this process grow before its next full collection, in percent: V8's
 * `--heap-growing-percent`, for every heap (isolate) of the process, the run's and commit threads' among them.
 *
 * Why: V8 caps the factor by the heap's ceiling — 1.3 at 256 MB up to 2.0 near 2 GB on 64-bit, so 1.6 for a run's
 * thread of 1 GiB (bounded-thread.ts), the factor it used at every full collection traced — and the run's thread,
 * whose pages of large answers pass through its old generation, held its old space at about 1.6 times its live set.
 * 30 % is V8's own factor for a 256 MB heap, without lowering the ceiling a pipeline's own stages may fill
 * (WEBDATA_HEAP_MB). Measured at 1,000,000 items (docs/benchmarks.md#memory): the peak 9–15 MB lower in eight pairs
 * of nine (median 251 → 240 MB), at about 6 % more CPU (the run's thread marks more often); 20 % cost more CPU for no
 * lower peak.
 */
export const HEAP_GROWING_PERCENT = 30;

/** A Node flag that sets the factor itself (`--heap-growing-percent=50`, or with underscores, as V8 accepts). */
const GROWING_FLAG = /^--heap[-_]growing[-_]percent(=|$)/;

/**
 * Sets HEAP_GROWING_PERCENT for every heap of this process, unless its Node flags set their own (`execArgv`: V8's
 * flags cannot come through NODE_OPTIONS). V8 reads the setting at each full collection, so it holds for the threads
 * started after this and for this one from its next collection. For a process of the command line's: a program of its
 * user's (`run(url)`) keeps V8's factors, which are its own to choose.
 */
export function boundHeapGrowth(execArgv: readonly string[] = process.execArgv): void {
  if (execArgv.some((flag) => GROWING_FLAG.test(flag))) return;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}
