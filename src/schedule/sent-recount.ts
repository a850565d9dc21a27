import type { Burst, Unproven } from './burst.ts';
import type { SendSamples } from './send-samples.ts';

/** A failed raise counted again: its fall back, and what it was sent at when under its rate (the limit is under it). */
export interface Recounted {
  rate: number;
  above: number | undefined;
}

/**
 * A failed raise's fall back, counted again from the requests sent, once those sent before its 429 were all heard (a
 * distributed run's leader hears its followers' answers with their reports, late): what the rate it was raised from
 * showed while it held until the raise, or what the raise showed until its 429, counted from what was sent (sentShown).
 * The rate controller (rate-controller.ts) takes it when lower than its fall back, and raises nothing before.
 */
export class SentRecount {
  readonly #samples: SendSamples;
  readonly #burst: Burst;
  /** How late the requests sent are all heard, beyond their latency. */
  readonly #heardAfterMs: number;
  /** The last rate that held until a raise: from when, until when, what rate. */
  #held: { from: number; to: number; rate: number } | undefined;
  #due: { unproven: Unproven; sentAt: number; at: number } | undefined;

  constructor(samples: SendSamples, burst: Burst, heardAfterMs: number) {
    this.#samples = samples;
    this.#burst = burst;
    this.#heardAfterMs = heardAfterMs;
  }

  /** `rate`, set at `from`, held until `to`, when it was raised. */
  held(from: number, to: number, rate: number): void {
    this.#held = { from, to, rate };
  }

  /** A raise into rates that never held (`unproven`) failed, by a request sent at `sentAt`: count again once heard. */
  failed(unproven: Unproven, sentAt: number, now: number): void {
    this.#due = sentAt <= now ? { unproven, sentAt, at: now + (this.#samples.latency ?? 0) + this.#heardAfterMs } : undefined;
  }

  /** A cut (another 429): what was due is no more. */
  cut(): void {
    this.#due = undefined;
  }

  /** At `now`: undefined, nothing due; 'waiting' for what was sent to be heard; or the fall back, counted. */
  due(now: number): Recounted | 'waiting' | undefined {
    const due = this.#due;
    if (due === undefined) return undefined;
    if (now < due.at) return 'waiting';
    this.#due = undefined;
    const held = this.#held?.to === due.unproven.at ? this.#held : undefined;
    const fromHeld = held ? sentShown(this.#samples, this.#burst, { at: held.from, from: held.rate, rate: held.rate, fromHeld: true }, held.to) : 0;
    const rate = Math.max(fromHeld, sentShown(this.#samples, this.#burst, due.unproven, due.sentAt));
    const ms = due.sentAt - due.unproven.at;
    const sent = this.#samples.sentBetween(due.unproven.at, due.sentAt);
    // The raise failed at what was sent (n + 1 over t, as in sentShown): a bound above that the next raise bisects
    // towards, where the rate set, never sent, sent it back over the limit (12.79's 12.3: 10.9 set, a 429 more).
    const above = sent === undefined || ms <= 0 ? undefined : ((sent + 1) * 1000) / ms;
    return { rate, above: above !== undefined && above < due.unproven.rate ? above : undefined };
  }
}

/**
 * What holding `unproven` until `until` shows of the limit (Burst.shown): its rate less the burst over the time, or,
 * where fewer requests went out than the rate (by a request or more), those sent, less the burst, over the time. A rate
 * never sent proves nothing: a fleet held back by its own round trips (nine in flight, each waiting for its slot, its
 * answer and its page's commit) sent 9.8 a second while its leader's rate was 11.02 against nginx's 10, and 11.02
 * "held" 2.2 s and left a floor of 10.15, which the fall back after the crossing landed on (docs/benchmarks.md, "The
 * rate sent, not the rate set"). Paced at 0.99 of its rate, one process sends at 0.97–0.99 of it: hardly moved.
 */
export function sentShown(samples: SendSamples, burst: Burst, unproven: Unproven, until: number): number {
  const shown = burst.shown(unproven, until);
  const ms = until - unproven.at;
  const sent = samples.sentBetween(unproven.at, until);
  if (sent === undefined || ms <= 0) return shown;
  // n requests sent at a rate r over t: n ≥ r × t − 1 however the pacing fell, so (n + 1) / t is r or more.
  return Math.min(shown, ((sent + 1 - burst.size(unproven.from)) * 1000) / ms);
}

