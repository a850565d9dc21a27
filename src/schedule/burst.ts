import { SAMPLE_LIMIT } from './send-samples.ts';

/**
 * A raise into rates that never held counts as held only after this many times the time its step takes to drain the
 * server's burst (were the limit at the rate before the step), and at most after HOLD_MAX_MS
 * (docs/benchmarks-history.md, "The first seconds at an unknown limit", issue 33).
 */
const HOLD_PER_STEP = 3;
const HOLD_MAX_MS = 15_000;
/** The burst assumed when the run's opening did not show one (its first 429 came late, or never). */
const DEFAULT_BURST = 3;

/** A raise into rates that never held: when, from what rate (known to be allowed or not), to what. */
export interface Unproven {
  at: number;
  from: number;
  rate: number;
  fromHeld: boolean;
  /** Not a raise: a cut to `from` from `rate`, which failed; `from` is not known to hold until the hold time. */
  cut?: boolean;
}

/**
 * What the rate controller (rate-controller.ts) knows of the server's burst: a bucket lets a rate a little over its
 * limit hold for seconds, so a rate that held counts only less what the burst could have hidden. The run's opening —
 * when its first 429 was sent, and when those sent before it that were accepted were sent (answers still on their way
 * count when they come) — is the burst and the limit's share of that time, at most.
 */
export class Burst {
  #opening: { at: number; accepted: number[] } | undefined;

  /** Whether the run's opening was seen (its first 429 came soon enough to show the burst). */
  get opened(): boolean {
    return this.#opening !== undefined;
  }

  /** The run's first 429, sent at `at`: those in `accepted` (send times) were accepted before it. */
  open(at: number, accepted: readonly number[]): void {
    this.#opening = { at, accepted: accepted.filter((sentAt) => sentAt < at) };
  }

  /** A request accepted, sent at `sentAt`: one sent before the opening's 429 is part of it. */
  accepted(sentAt: number): void {
    const opening = this.#opening;
    if (opening && sentAt < opening.at && opening.accepted.length < SAMPLE_LIMIT) opening.accepted.push(sentAt);
  }

  /**
   * The server's burst: what the run's opening showed of it (accepted before its first 429, less what a limit of at
   * least `limit` let through meanwhile), or a guess.
   */
  size(limit: number): number {
    const opening = this.#opening;
    if (opening === undefined) return DEFAULT_BURST;
    // Over every stretch that ends at the first 429: one that began when sending outran the limit started with the
    // bucket full (an opening slow to start sends under the limit at first, and the whole of it reads low).
    const sent = opening.accepted.toSorted((a, b) => a - b);
    let burst = 1;
    for (const [i, from] of sent.entries()) burst = Math.max(burst, sent.length - i - (limit * (opening.at - from)) / 1000);
    return burst;
  }

  /**
   * How long the current rate must hold before the next raise: a raise into rates that never held must outlast what
   * the server's burst could hide — a step of s over a limit at the rate before it drains a burst of b in b / s — a few
   * times over (a burst lets a rate a few per cent over the limit hold for seconds).
   */
  holdMs(unproven: Unproven | undefined): number {
    if (!unproven) return 0;
    const step = Math.max(unproven.rate - unproven.from, unproven.rate * 0.01);
    return Math.min(HOLD_MAX_MS, (HOLD_PER_STEP * this.size(unproven.from) * 1000) / step);
  }

  /**
   * What holding an unproven raise until `at` shows of the limit: its rate less the burst spread over that time (the
   * bucket was full when the rate went up; one less full hid less, and the limit shown is lower than the true one).
   */
  shown(unproven: Unproven, at: number): number {
    const heldMs = at - unproven.at;
    return heldMs <= 0 ? 0 : unproven.rate - (this.size(unproven.from) * 1000) / heldMs;
  }
}
