// Scenario (b) in virtual time, for tuning the rate controller in seconds rather than minutes: the controller, an even
// pacer 1 % under its rate, the concurrency it sets, the 429's jittered pause (250 ms base, doubling in a storm) and
// a bucket of 2 at 10/s that answers a 429 at once and a success after 200 ms, as nginx `limit_req` (leaky bucket) or
// the simulator (token bucket). It leaves out what real runs add (start-up delays, timers firing late, a loaded
// machine), so it decides nothing: `node test/bench/rate-timeline.ts` does. Its figures were within 1–2 % of theirs
// on a quiet machine (docs/benchmarks-history.md, issue 33).
// `node test/bench/learner-model.ts [nginx|token] [runs]`: each run's achieved / limit, 429s and timeline.
import { fullJitter } from '../../src/schedule/backoff.ts';
import { createRateController } from '../../src/schedule/rate-controller.ts';

type Bucket = 'nginx' | 'token';

function server(kind: Bucket, limit: number, burst: number) {
  let tokens = burst;
  let refilledAt = 0;
  let excess = 0;
  let last: number | undefined;
  return (at: number): boolean => {
    if (kind === 'token') {
      tokens = Math.min(burst, tokens + ((at - refilledAt) / 1000) * limit);
      refilledAt = at;
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    }
    // nginx: `excess` drains at the limit, each request adds one; refused past `burst` (nodelay).
    if (last === undefined) {
      last = at;
      return true;
    }
    const next = Math.max(0, excess - (limit * (at - last)) / 1000 + 1);
    if (next > burst) return false;
    excess = next;
    last = at;
    return true;
  };
}

export function modelRun(kind: Bucket, seed: number, { limit = 10, maxRate = 30, seconds = 30, latencyMs = 200 } = {}) {
  let state = seed;
  const random = () => {
    state = (state * 1664525 + 1013904223) % 4294967296;
    return state / 4294967296;
  };
  let now = 0;
  const controller = createRateController({ maxRate, maxConcurrency: 8, minRate: maxRate / 20 }, { now: () => now });
  const admit = server(kind, limit, 2);
  let interval = 1000 / (controller.rate * 0.99);
  let lastGranted = Number.NEGATIVE_INFINITY;
  let pausedUntil = Number.NEGATIVE_INFINITY;
  let inFlight = 0;
  let inARow = 0;
  let ok = 0;
  let limited = 0;
  const answers: { at: number; sentAt: number; ok: boolean }[] = [];
  const timeline: string[] = [];
  const applied = (mark: string) => {
    interval = 1000 / (controller.rate * 0.99);
    timeline.push(`${(now / 1000).toFixed(1)}:${mark}${controller.rate.toFixed(2)}`);
  };
  while (now < seconds * 1000) {
    answers.sort((a, b) => a.at - b.at);
    const slot = Math.max(lastGranted + interval, pausedUntil, now);
    const answer = answers[0];
    if (answer && (answer.at <= slot || inFlight >= controller.concurrency)) {
      answers.shift();
      now = Math.max(now, answer.at);
      inFlight -= 1;
      if (answer.ok) {
        ok += 1;
        inARow = 0;
        if (controller.onSuccess(answer.sentAt, now - answer.sentAt)) applied('^');
      } else {
        limited += 1;
        inARow += 1;
        if (controller.onRateLimited(answer.sentAt)) applied('v');
        pausedUntil = Math.max(pausedUntil, now + fullJitter(inARow, 250, 60_000, random));
      }
      continue;
    }
    now = slot;
    lastGranted = slot;
    inFlight += 1;
    const accepted = admit(now);
    answers.push({ at: now + (accepted ? latencyMs : 1), sentAt: now, ok: accepted });
  }
  return { achieved: ok / (seconds * limit), share429: limited / (ok + limited), limited, timeline: timeline.join(' ') };
}

if (import.meta.main) {
  const kinds = process.argv[2] ? [process.argv[2] as Bucket] : (['nginx', 'token'] as const);
  const runs = Number(process.argv[3] ?? 5);
  for (const kind of kinds) {
    for (let seed = 1; seed <= runs; seed++) {
      const r = modelRun(kind, seed);
      console.log(`${kind} ${r.achieved.toFixed(3)} ${(r.share429 * 100).toFixed(2)} % (${r.limited}) ${r.timeline}`);
    }
  }
}
