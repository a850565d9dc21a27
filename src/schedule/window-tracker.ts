import type { RateLimitHint } from './rate-limit-headers.ts';

/** What the server's rate-limit headers show it to be, once they show it. */
export type LimiterKind = 'fixed_window' | 'bucket';

/** How many answers in a row must each take one from `remaining`, with no refill, before a window is told apart. */
const UNREFILLED_ANSWERS = 8;
/** Tokens a bucket would have refilled meanwhile, at the policy's rate, for the absence of any to count. */
const REFILL_EVIDENCE = 3;

/**
 * Tells a fixed window from a token bucket by how `remaining` moves, and where the window ends
 * (docs/design.md#the-contract-and-what-was-decided, Limits).
 *
 * A fixed window only counts down (one per request) and then jumps back to its limit at the window's end, when its
 * reset starts again from the whole window. A bucket refills as time passes: `remaining` creeps up between answers
 * (or, emptied and waited for, comes back with a reset of one token's time, not a window's). Until one of these is
 * seen the kind is unknown, and the scheduler spreads what is left evenly over the reset, which is safe for both.
 *
 * The window's end: `reset` comes in whole seconds (most servers round it up), so each answer bounds the end from
 * above at `at + reset`; the least of these bounds in a window, over answers at many fractions of a second, is within
 * the spacing of the answers of the true end, and never before it when the server rounds up.
 */
export function windowTracker() {
  let kind: LimiterKind | undefined;
  let lastRemaining: number | undefined;
  // The current window (or stretch of answers): where it began, how many answers it has, and the end's bound.
  let first: { remaining: number; at: number } | undefined;
  let answers = 0;
  let endBound = Number.POSITIVE_INFINITY;
  let longestReset = 0;
  let limit = 0;

  const restart = (hint: RateLimitHint, now: number) => {
    first = { remaining: hint.remaining, at: now };
    answers = 1;
    endBound = now + hint.resetMs;
  };

  return {
    get kind(): LimiterKind | undefined {
      return kind;
    },
    /** The window's end by the scheduler's clock (the least upper bound the answers gave), once a window is known. */
    get windowEnd(): number | undefined {
      return kind === 'fixed_window' && Number.isFinite(endBound) ? endBound : undefined;
    },

    /** An answer's headers, read at `now`. Returns the kind when this answer told it for the first time. */
    observe(hint: RateLimitHint, now: number): LimiterKind | undefined {
      const before = kind;
      limit = Math.max(limit, hint.limit ?? 0, hint.remaining + 1);
      const previous = lastRemaining;
      lastRemaining = hint.remaining;
      if (previous === undefined || !first) {
        restart(hint, now);
        longestReset = hint.resetMs;
        return undefined;
      }
      if (hint.remaining > previous + 1) {
        // Back up by more than one (one can be answers crossing on the way): a window that began again (most of the limit
        // back, with a reset of most of a window), or a bucket's refill.
        const windowBegan = hint.remaining >= limit / 2 && hint.resetMs >= longestReset / 2;
        if (kind === undefined) kind = windowBegan ? 'fixed_window' : 'bucket';
        restart(hint, now);
        longestReset = Math.max(longestReset, hint.resetMs);
        return kind !== before ? kind : undefined;
      }
      answers += 1;
      endBound = Math.min(endBound, now + hint.resetMs);
      longestReset = Math.max(longestReset, hint.resetMs);
      // Before the first window ends: long enough that a bucket at the policy's rate would have refilled a few, did
      // `remaining` count down one per answer (a window) or less (a bucket)?
      const policyRate = hint.policies.length > 0 ? Math.min(...hint.policies.map((policy) => policy.rate)) : undefined;
      if (kind === undefined && policyRate !== undefined && answers >= UNREFILLED_ANSWERS && ((now - first.at) / 1000) * policyRate >= REFILL_EVIDENCE) {
        const counted = first.remaining - hint.remaining;
        if (counted >= answers - 2) kind = 'fixed_window';
        else if (counted <= answers - 1 - REFILL_EVIDENCE) kind = 'bucket';
      }
      return kind !== before ? kind : undefined;
    },
  };
}
