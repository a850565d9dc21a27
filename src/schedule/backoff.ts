/**
 * Exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff And Jitter"): a delay drawn
 * uniformly from [0, min(cap, base × 2^(attempt − 1))]. Spreads retries of many clients instead of
 * synchronising them.
 */
export function fullJitter(attempt: number, baseMs: number, capMs: number, random: () => number): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}
