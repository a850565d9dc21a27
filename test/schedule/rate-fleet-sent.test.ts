// A fleet's leader behind nginx, counted in 429s on a clock of the test's own: the fleet sends under the rate the
// leader sets, held back by its own round trips, and what a rate held or a raise that failed shows of the limit is
// counted from what was sent, not from the rate set (src/schedule/rate-controller.ts; docs/benchmarks.md, "The rate
// sent, not the rate set").
import { describe, expect, it } from 'vitest';
import { resolveSchedulerOptions } from '../../src/schedule/options.ts';
import { createRateController } from '../../src/schedule/rate-controller.ts';
import { createThrottle } from '../../src/schedule/throttle.ts';
import type { SchedulerEvent } from '../../src/schedule/types.ts';

/** What the model drives: a rate controller, or a throttle around one (which says why each rate changed). */
interface Learner {
  readonly rate: number;
  readonly concurrency: number;
  onSuccess(sentAt: number, latencyMs: number): unknown;
  onRateLimited(sentAt: number): unknown;
}

/** A leader's throttle (it learns, from 2 s of answers: `learns`), on the model's clock, its events kept in `events`. */
function leaderThrottle(clock: { now(): number }, events: SchedulerEvent[]): Learner {
  const queue = { concurrency: 9, pause: () => undefined, start: () => undefined };
  const throttle = createThrottle({
    config: resolveSchedulerOptions({ rate: { requestsPerSecond: 30 }, concurrency: 9, learns: () => true }),
    clock: { now: clock.now, sleep: async () => undefined },
    queue,
    emit: (event) => void events.push(event),
    halt: new AbortController().signal,
  });
  return {
    get rate() {
      return throttle.rate;
    },
    get concurrency() {
      return queue.concurrency;
    },
    onSuccess: (sentAt) => throttle.onSuccess(sentAt),
    onRateLimited: (sentAt) => throttle.onRateLimited(sentAt, 0, 'the model'),
  };
}

/**
 * Three workers' requests, paced by one controller (a shared pacer's leader) at `maxRate` 30/s with nine in flight at
 * most, behind nginx's `limit_req` at `limit` r/s, burst 2, nodelay: a request is refused, at once, when the excess it
 * would bring (the last accepted one's, less `limit` a second since, plus one) is over the burst; an accepted one is
 * answered `latencyMs` later. A request's place among the nine is taken again only `cycleMs` after it left (the
 * worker's slot statement, the answer, the page's commit): nine in flight send 9000 / `cycleMs` a second at most,
 * whatever the rate set. Requests leave paced at 0.99 of the rate (the throttle's margin), none for 125 ms after a 429.
 * Every third request is the leader's, heard as it is answered; the followers' are heard with their next report, every
 * `reportMs` (their 429s at once: a pause reports). Returns when each 429 was sent and the rates set. `learner`: what
 * learns (default: the rate controller a leader has).
 */
function fleetBehindNginx(
  limit: number,
  seconds: number,
  { cycleMs = 0, jitterMs = 0, seed = 0, reportMs = 500, latencyMs = 200, learner = undefined as ((clock: { now(): number }) => Learner) | undefined } = {},
) {
  let now = 0;
  const clock = { now: () => now };
  const controller: Learner = learner?.(clock) ?? createRateController({ maxRate: 30, maxConcurrency: 9, learnAfterMs: 2000 }, clock);
  let excess = 0;
  let lastAt = 0;
  let next = 0;
  let pausedUntil = 0;
  let sent = 0;
  let accepted = 0;
  const busy: number[] = [];
  const answers: { heardAt: number; sentAt: number }[] = [];
  const refused: number[] = [];
  const rates: { at: number; rate: number }[] = [];
  for (; now < seconds * 1000; now += 1) {
    answers.sort((a, b) => a.heardAt - b.heardAt);
    while (answers.length > 0 && (answers[0]?.heardAt as number) <= now) controller.onSuccess((answers.shift() as { sentAt: number }).sentAt, latencyMs);
    if (rates.at(-1)?.rate !== controller.rate) rates.push({ at: now, rate: controller.rate });
    while (busy.length > 0 && (busy[0] as number) <= now) busy.shift();
    if (now < next || now < pausedUntil || busy.length >= Math.min(9, controller.concurrency)) continue;
    sent += 1;
    const after = Math.max(0, excess - (limit * (now - lastAt)) / 1000) + 1;
    if (after > 2) {
      refused.push(now);
      controller.onRateLimited(now);
      pausedUntil = now + 125;
    } else {
      [excess, lastAt] = [after, now];
      accepted += 1;
      const answeredAt = now + latencyMs;
      answers.push({ sentAt: now, heardAt: sent % 3 === 0 ? answeredAt : Math.ceil(answeredAt / reportMs) * reportMs });
    }
    busy.push(now + Math.max(latencyMs, cycleMs + ((((sent + seed * 131) * 7919) % 1000) / 1000 - 0.5) * 2 * jitterMs));
    busy.sort((a, b) => a - b);
    next = now + 1000 / (controller.rate * 0.99);
  }
  return { refused, accepted, rates };
}

describe('a fleet held back under the rate its leader sets', () => {
  it('at three times a limit of 10/s, sending about 10/s at any rate over it: the fall back after the crossing lands under the limit', () => {
    // 920 ms a request's round trip, ±150 (bench (j)'s nginx log: 9.8 sent a second at a rate set at 11.02, 10 at 12.79);
    // eight runs, the round trips' spread drawn differently in each.
    const falls: number[] = [];
    let refusals = 0;
    for (let seed = 0; seed < 8; seed++) {
      const { refused, rates } = fleetBehindNginx(10, 20, { cycleMs: 920, jitterMs: 150, seed });
      refusals += refused.length;
      // The crossing's 429 is the third (two at the opening); its fall back is what holds 2 s after it.
      const crossing = refused[2] as number;
      falls.push(rates.findLast(({ at }) => at <= crossing + 2000)?.rate as number);
    }
    // Before: 11.02 "held" at 10 sent, and its floor, or what the failed 12.79 showed counted at 12.79, was the fall
    // back: 10.05–11.43, over the limit in all eight; 27 429s in all. After: 9.27–9.97, and 24.
    for (const rate of falls) expect(rate).toBeLessThanOrEqual(10);
    expect(refusals).toBeLessThanOrEqual(25);
  });

  it('one sending at the rate set (no round trip holds it back) pays no more, and loses little', () => {
    const { refused, accepted } = fleetBehindNginx(10, 30);
    // Before: 4 429s, 296 accepted (the fall back after the crossing at 9.89, a probe's 429 at 25 s); after, 11.02's
    // first requests went out late (the pacing's interval at 7.5 still running, a 429's pause): 13 sent in 1.3 s, and
    // the fall back is 9.56, then 9.95.
    expect(refused.length).toBeLessThanOrEqual(3);
    expect(accepted / 300).toBeGreaterThan(0.975);
  });

  it("a rate lowered by what was sent says so in its event, `recounted`, never `sustained_success`", () => {
    const events: SchedulerEvent[] = [];
    for (let seed = 0; seed < 4; seed++) fleetBehindNginx(10, 20, { cycleMs: 920, jitterMs: 150, seed, learner: (clock) => leaderThrottle(clock, events) });
    const adapts = events.filter((e): e is Extract<SchedulerEvent, { type: 'adapt' }> => e.type === 'adapt');
    const lowered = adapts.slice(1).filter((change, i) => change.rate < (adapts[i] as { rate: number }).rate);
    const raised = adapts.slice(1).filter((change, i) => change.rate > (adapts[i] as { rate: number }).rate);
    // Before: the recounted fall back came down as `sustained_success`, as a raise does.
    expect(lowered.filter((change) => change.reason === 'recounted').length).toBeGreaterThan(0);
    for (const change of lowered) expect(['rate_limited', 'recounted']).toContain(change.reason);
    for (const change of raised) expect(change.reason).not.toBe('recounted');
  });
});
