/**
 * The rate controller's next rate after sustained success at `rate` (rate-controller.ts): `bad`, the lowest rate that
 * failed (undefined: none yet), `maxRate` the configured rate, `probe` whether the raise is a probe past the limit, and
 * `highest` the highest rate that held before this one. A probe raises `bad` to the rate probed (`probing`).
 */
export function nextRaise(rate: number, bad: number | undefined, maxRate: number, probe: boolean, highest: number | undefined): { rate: number; bad: number | undefined; probing: boolean } {
  if (bad === undefined) {
    // No limit seen yet: close half the gap to the configured rate.
    return { rate: rate + Math.max((maxRate - rate) / 2, rate * 0.02), bad, probing: false };
  }
  if (rate < bad * 0.95) {
    // Far below the lowest rate that failed: halve the gap (a bisection between good and bad).
    return { rate: rate + Math.max((bad * 0.97 - rate) / 2, rate * 0.02), bad, probing: false };
  }
  if (!probe && highest !== undefined) {
    // Back from a failed probe: up to the highest rate that held, no further, at the pace near the limit.
    return { rate: Math.min(rate * 1.01, highest), bad, probing: false };
  }
  // Close to it: probe upwards slowly, in case the limit rose.
  const next = rate * 1.01;
  return { rate: next, bad: Math.max(bad, next), probing: true };
}
