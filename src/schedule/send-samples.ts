/** Send times kept of each kind, newest last: enough for the window at any rate a server is likely to allow. */
export const SAMPLE_LIMIT = 256;

/**
 * What a rate controller measures from its answers (src/schedule/rate-controller.ts): when the requests accepted and
 * those refused were sent (bounded), and their latency, smoothed. Each figure is over a window of `windowMs`.
 */
export class SendSamples {
  readonly accepted: number[] = [];
  readonly rejected: number[] = [];
  /** When each of `accepted` and `rejected` was answered (the same order): a request reached the server in between. */
  readonly #acceptedAnswered: number[] = [];
  readonly #rejectedAnswered: number[] = [];
  latency: number | undefined;
  readonly #windowMs: number;
  readonly #learnAfterMs: number;

  constructor(windowMs: number, learnAfterMs: number) {
    this.#windowMs = windowMs;
    this.#learnAfterMs = learnAfterMs;
  }

  success(sentAt: number, latencyMs: number): void {
    push(this.accepted, sentAt);
    push(this.#acceptedAnswered, sentAt + latencyMs);
    this.latency = this.latency === undefined ? latencyMs : this.latency * 0.8 + latencyMs * 0.2;
  }

  /** A 429 for a request sent at `sentAt`, answered at `answeredAt` (at once, when not told). */
  refusal(sentAt: number, answeredAt = sentAt): void {
    push(this.rejected, sentAt);
    push(this.#rejectedAnswered, answeredAt);
  }

  /**
   * The server's limit, learned from what it accepted over the window, but only while it was rejecting a fair
   * share of what was sent (saturated): otherwise the accepted rate is merely our own rate.
   */
  saturatedRate(now: number): number | undefined {
    // Up to a latency ago only: a 429 comes at once, but the requests accepted since are still on their way (counted
    // up to now, the limit reads low by a latency's worth of them).
    now -= Math.min(this.latency ?? 0, this.#windowMs / 2);
    const from = now - this.#windowMs;
    const ok = between(this.accepted, from, now);
    const refused = between(this.rejected, from, now);
    const first = Math.min(this.accepted.find((sentAt) => sentAt >= from) ?? now, this.rejected.find((sentAt) => sentAt >= from) ?? now);
    const span = now - first;
    if (ok < 5 || span < this.#learnAfterMs || refused / (ok + refused) < 0.05) return undefined;
    return (ok / span) * 1000;
  }

  /**
   * The least the server's limit can be, as its 429s show it: under a token or leaky bucket, a 429 says the bucket was
   * full (less than one request's room), and it never overflows after, so that from a 429 to any request accepted `t`
   * later the server accepted at most its limit × t plus that one request, whatever was sent meanwhile (a bucket left
   * empty only lost refills): the limit is at least (accepted since the 429 − 1) / t. From a 429 early in a run to its
   * end, while a key was kept at its limit or over it, that is the limit within 1 / t — where a rate held shows it
   * only less the whole burst over t. The server's times are not ours, so each is taken on the safe side of what is
   * known: a request reached it after it was sent and before it was answered. Counted are the requests sent after the
   * 429 was answered (they came after it, however late the 429's request left: timed by their send times alone, some
   * that left a busy thread before it read 8.05 against nginx's 8 r/s), over the time from the 429's send to the latest
   * answer among them. Only stretches of `minSpanMs` or more, whose accepted requests are all still kept, count, and
   * from 429s sent at `since` or later (those before were a limit that has fallen).
   */
  provenLimit(minSpanMs: number, since = Number.NEGATIVE_INFINITY): number | undefined {
    const order = this.accepted.map((sentAt, i) => ({ sentAt, answeredAt: this.#acceptedAnswered[i] ?? sentAt })).sort((a, b) => a.sentAt - b.sentAt);
    // A stretch from before the oldest accepted request kept would count too few (still a bound, a loose one).
    const oldest = this.accepted.length < SAMPLE_LIMIT ? Number.NEGATIVE_INFINITY : (order[0]?.sentAt ?? 0);
    let best: number | undefined;
    for (const [i, from] of this.rejected.entries()) {
      if (from < oldest || from < since) continue;
      const after = this.#rejectedAnswered[i] ?? from;
      let counted = 0;
      let latest = Number.NEGATIVE_INFINITY;
      for (const request of order) {
        if (request.sentAt <= after) continue;
        counted += 1;
        latest = Math.max(latest, request.answeredAt);
        const span = latest - from;
        if (span < minSpanMs) continue;
        const bound = ((counted - 1) * 1000) / span;
        if (best === undefined || bound > best) best = bound;
      }
    }
    return best;
  }

  /**
   * Whether requests went out at `share` of `rate` at least since `since`: from the first of them (a pause, a 429's, is
   * not time the key was kept from sending), over the window at most (the samples kept are bounded, and a rate held for
   * a minute holds many more), up to a latency ago (those sent since are not answered yet). Too short a time to tell
   * (under two requests' worth) counts as busy.
   */
  busy(rate: number, share: number, since: number, now: number): boolean {
    const until = now - (this.latency ?? 0);
    const after = Math.max(since, until - this.#windowMs);
    if (!Number.isFinite(rate) || (rate * (until - after)) / 1000 < 2) return true;
    const from = Math.min(this.accepted.find((sentAt) => sentAt >= after) ?? until, this.rejected.find((sentAt) => sentAt >= after) ?? until);
    const sent = between(this.accepted, from, until) + between(this.rejected, from, until);
    return sent >= 2 && sent + 1 >= (share * rate * (until - from)) / 1000;
  }

  /**
   * The concurrency a `rate` needs at the latency seen (twice the requests a latency holds, and one), or `concurrency`
   * while no answer was timed. A limiter's 429s come back at once, before any 200: halved blind, the concurrency could
   * hold the requests under the limit whatever the rate, so that a rate over the limit seemed to hold, and the next
   * raise, sized from it, cost 429s (3 more in the one-process run of bench (j): docs/benchmarks-history.md, "Issue 33,
   * the lead's quiet run").
   */
  neededConcurrency(rate: number, concurrency: number): number {
    if (!Number.isFinite(rate)) return 1;
    if (this.latency === undefined) return concurrency;
    return Math.ceil((rate * this.latency * 2) / 1000) + 1;
  }

  /**
   * The requests sent from `from` until `to` (accepted and refused) that were answered so far; undefined when the
   * samples kept (SAMPLE_LIMIT of each kind) may have lost some of them.
   */
  sentBetween(from: number, to: number): number | undefined {
    const lost = (list: number[]) => list.length >= SAMPLE_LIMIT && (list[0] as number) >= from;
    if (lost(this.accepted) || lost(this.rejected)) return undefined;
    const within = (sentAt: number) => sentAt >= from && sentAt < to;
    return this.accepted.filter(within).length + this.rejected.filter(within).length;
  }

  /** Attempts per second over the window (accepted and rejected), when there are a few to go on. */
  sendingRate(now: number): number | undefined {
    const from = now - this.#windowMs;
    const all = [...this.accepted, ...this.rejected].filter((sentAt) => sentAt >= from);
    const span = now - Math.min(...all);
    return all.length >= 2 && span >= 100 ? (all.length / span) * 1000 : undefined;
  }
}

function push(list: number[], at: number): void {
  list.push(at);
  if (list.length > SAMPLE_LIMIT) list.splice(0, list.length - SAMPLE_LIMIT);
}

function between(list: number[], from: number, to: number): number {
  return list.filter((sentAt) => sentAt >= from && sentAt <= to).length;
}
