// One function per scenario. Each measures and returns figures; none asserts: a benchmark that throws on a miss
// hides the very numbers needed to understand the miss.
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from '../../src/client/index.ts';
import { createScheduler, type Scheduler, type SchedulerOptions, type SchedulerStats } from '../../src/schedule/index.ts';
import { fixedWindowTarget, type LimitedOptions, limitedTarget, type ServerKind, type Target, unlimitedTarget } from './servers.ts';
import { record, type Recording, runWork, type WorkPlan, type WorkTally } from './workload.ts';

const LATENCY_MS = 200;
const BURST = 2;
/** Endless work: more series than the concurrency, so that a free slot always has a series ready to use it. */
const ENDLESS: WorkPlan = { series: 40, pagesPerQuery: 20 };

const log = (line: string) => process.stderr.write(`${line}\n`);
const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
const ratio = (part: number, whole: number) => (whole === 0 ? null : round(part / whole, 4));

interface Run {
  stats: SchedulerStats;
  tally: WorkTally;
  recording: Recording;
  /** From the first request to `stop()` (windowed runs) or to the last answer (fixed work). */
  seconds: number;
  /** Fixed work still unfinished after `FIXED_WORK_CAP_MS`. */
  timedOut: boolean;
  serverStatuses: Record<string, number>;
  debited: number;
}

/** Fixed work that has not finished by then is cut off and reported as such, rather than hanging the benchmark. */
const FIXED_WORK_CAP_MS = 120_000;

/**
 * Runs `plan` through a fresh scheduler and client against `target`. With `windowMs` the run is cut off by
 * `stop()` after that long (requests in flight still settle: they were sent inside the window and are paid for).
 */
async function drive(target: Target, options: SchedulerOptions, plan: WorkPlan, windowMs?: number): Promise<Run> {
  const client = createClient({ baseUrl: target.url, apiKey: target.apiKey, timeoutMs: 10_000 });
  const scheduler: Scheduler = createScheduler(options);
  const recorder = record(scheduler);
  let finished = false;
  const work = runWork(scheduler, client, plan).finally(() => (finished = true));
  const cap = new AbortController();
  await Promise.race([work, sleep(windowMs ?? FIXED_WORK_CAP_MS, undefined, { signal: cap.signal }).catch(() => undefined)]);
  cap.abort();
  const seconds = (performance.now() - recorder.startedAt) / 1000;
  recorder.windowEnded();
  const timedOut = windowMs === undefined && !finished;
  if (!finished) {
    scheduler.stop();
    await scheduler.onIdle();
  }
  const tally = await work;
  recorder.stop();
  await client.close();
  return {
    stats: scheduler.stats(),
    tally,
    timedOut,
    recording: recorder.recording,
    seconds,
    serverStatuses: await target.serverStatuses(),
    debited: target.sim.stats().credits.main?.debited ?? 0,
  };
}

function share429(stats: SchedulerStats): number | null {
  return ratio(stats.requests.byStatus['429'] ?? 0, stats.requests.total);
}

/** The second half of a window, when the scheduler has had time to learn: separates settling from start-up. */
function steadyState(recording: Recording, seconds: number, serverRate: number) {
  const from = Math.floor(seconds / 2);
  const to = Math.floor(seconds);
  const sum = (list: number[]) => list.slice(from, to).reduce((a, b) => a + b, 0);
  const ok = sum(recording.perSecond.ok);
  const limited = sum(recording.perSecond.rateLimited);
  const all = ok + limited + sum(recording.perSecond.other);
  return {
    seconds: [from, to],
    achievedPerSecond: round(ok / (to - from), 2),
    achievedOverServerLimit: ratio(ok / (to - from), serverRate),
    share429: ratio(limited, all),
  };
}

async function rateLimitedRun(server: ServerKind, limit: LimitedOptions, configuredRate: number, concurrency: number, windowMs: number) {
  const target = await limitedTarget(server, limit);
  try {
    const options = { rate: { requestsPerSecond: configuredRate }, concurrency };
    const run = await drive(target, options, ENDLESS, windowMs);
    const ok = run.stats.requests.byStatus['200'] ?? 0;
    const achieved = ok / run.seconds;
    return {
      server,
      limiter: target.limiter,
      latencyMs: limit.latencyMs,
      configured: { ratePerSecond: configuredRate, concurrency },
      work: { series: ENDLESS.series, pagesPerQuery: ENDLESS.pagesPerQuery, endless: true },
      windowSeconds: round(run.seconds, 2),
      responses: { total: run.stats.requests.total, byStatus: run.stats.requests.byStatus },
      serverSide: { byStatus: run.serverStatuses, creditsDebited: run.debited },
      successes: ok,
      achievedPerSecond: round(achieved, 2),
      achievedOverServerLimit: ratio(achieved, limit.ratePerSecond),
      share429: share429(run.stats),
      steadyState: steadyState(run.recording, run.seconds, limit.ratePerSecond),
      finalRate: round(run.stats.rate, 2),
      finalConcurrency: run.stats.concurrency,
      rateLimitedWaitMs: round(run.stats.rateLimitedWaitMs, 0),
      retries: run.stats.retries,
      rateLimited: run.stats.rateLimited,
      longestSilence: run.recording.longestSilence,
      pauses: { ...run.recording.pauses, requestedMs: round(run.recording.pauses.requestedMs, 0) },
      adapt: { cuts: run.recording.cuts, raises: run.recording.raises, timeline: run.recording.adapt },
      perSecond: run.recording.perSecond,
      failedPages: run.tally.failed,
    };
  } finally {
    await target.close();
  }
}

/**
 * (a) The server allows exactly the configured rate. Even pacing at that rate should be accepted almost entirely;
 * only jitter between the pacer's timers and the server's clock can earn a 429, and the burst of 2 absorbs it.
 */
export async function scenarioRateAtLimit(server: ServerKind, windowMs: number) {
  log(`(a) ${server}: configured 20/s, server 20/s, ${windowMs / 1000} s`);
  // The simulator keeps its default Retry-After (whole seconds): it is part of what a 429 costs there.
  return rateLimitedRun(server, { ratePerSecond: 20, burst: BURST, latencyMs: LATENCY_MS, retryAfter: 'seconds' }, 20, 8, windowMs);
}

/** (b) The server allows a third of the configured rate and never says how long to wait: the scheduler must learn it. */
export async function scenarioRateAboveLimit(server: ServerKind, windowMs: number) {
  log(`(b) ${server}: configured 30/s, server 10/s, no Retry-After, ${windowMs / 1000} s`);
  return rateLimitedRun(server, { ratePerSecond: 10, burst: BURST, latencyMs: LATENCY_MS, retryAfter: 'none' }, 30, 8, windowMs);
}

/** (c) One response in ten is a 5xx: every page must still arrive, and only 2xx may be counted as spent. */
export async function scenarioServerErrors() {
  const plan: WorkPlan = { series: 30, pagesPerQuery: 10, queriesPerSeries: 1 };
  const configured = { ratePerSecond: 40, concurrency: 8 };
  log(`(c) simulator: 10 % 5xx, ${plan.series} series × ${plan.pagesPerQuery} pages`);
  const target = await unlimitedTarget({ latencyMs: LATENCY_MS, faults: { serverErrorRate: 0.1 } });
  try {
    const run = await drive(target, { rate: { requestsPerSecond: configured.ratePerSecond }, concurrency: configured.concurrency }, plan);
    const spent = run.stats.credits.spent;
    return {
      server: 'simulator',
      latencyMs: LATENCY_MS,
      faults: { serverErrorRate: 0.1 },
      configured,
      work: { series: plan.series, pagesPerQuery: plan.pagesPerQuery, planned: run.tally.planned },
      seconds: round(run.seconds, 2),
      timedOut: run.timedOut,
      fetched: run.tally.fetched,
      failedPages: run.tally.failed,
      allFetched: run.tally.fetched === run.tally.planned,
      creditsSpent: spent,
      creditsUncertain: run.stats.credits.uncertain,
      creditsDebitedBySimulator: run.debited,
      spentEqualsFetched: spent === run.tally.fetched,
      spentEqualsDebited: spent === run.debited,
      responses: { total: run.stats.requests.total, byStatus: run.stats.requests.byStatus },
      serverSide: { byStatus: run.serverStatuses },
      retries: run.stats.retries,
      retriesByReason: run.recording.retries,
      rateLimitedWaitMs: round(run.stats.rateLimitedWaitMs, 0),
    };
  } finally {
    await target.close();
  }
}

/**
 * (d) The budget is half the work, with 5xx in the way: the run must spend exactly the budget — not less (credits
 * held by requests that then fail must come back), never more (reservations at concurrency 16).
 */
export async function scenarioBudget() {
  const plan: WorkPlan = { series: 30, pagesPerQuery: 10, queriesPerSeries: 1 };
  const budget = 150;
  const configured = { ratePerSecond: 80, concurrency: 16 };
  log(`(d) simulator: budget ${budget}, ${plan.series * plan.pagesPerQuery} pages, 5 % 5xx, concurrency ${configured.concurrency}`);
  const target = await unlimitedTarget({ latencyMs: LATENCY_MS, faults: { serverErrorRate: 0.05 } });
  try {
    const run = await drive(
      target,
      { rate: { requestsPerSecond: configured.ratePerSecond }, concurrency: configured.concurrency, budget: { maxCredits: budget } },
      plan,
    );
    const planned = run.tally.planned ?? 0;
    const needed = Math.min(budget, planned);
    const spent = run.stats.credits.spent;
    return {
      server: 'simulator',
      latencyMs: LATENCY_MS,
      faults: { serverErrorRate: 0.05 },
      configured: { ...configured, budget },
      work: { series: plan.series, pagesPerQuery: plan.pagesPerQuery, planned },
      seconds: round(run.seconds, 2),
      timedOut: run.timedOut,
      creditsNeeded: needed,
      creditsSpent: spent,
      spentOverNeeded: ratio(spent, needed),
      creditsDebitedBySimulator: run.debited,
      debitedOverNeeded: ratio(run.debited, needed),
      maxSpentSeen: run.recording.maxSpent,
      maxSpentPlusReservedSeen: run.recording.maxCommitted,
      neverAboveBudget: run.recording.maxCommitted <= budget && run.debited <= budget,
      fetched: run.tally.fetched,
      failedPages: run.tally.failed,
      stoppedSeries: run.tally.stoppedSeries,
      responses: { total: run.stats.requests.total, byStatus: run.stats.requests.byStatus },
      serverSide: { byStatus: run.serverStatuses },
      retries: run.stats.retries,
      rateLimitedWaitMs: round(run.stats.rateLimitedWaitMs, 0),
    };
  } finally {
    await target.close();
  }
}

/**
 * (m) A plan that counts requests per fixed window (50 per 5 s), the pipeline configured 3× faster than the window's
 * average (30/s against 10/s): with `RateLimit` headers on every answer (and Retry-After on a 429), or with only
 * Retry-After to the window's end. The figure is the share of the windows' requests used: accepted requests over 50
 * per window the run spans.
 */
export async function scenarioFixedWindow(headers: 'ietf' | 'none', windowMs: number) {
  const quota = { requests: 50, windowMs: 5_000 };
  const configured = 30;
  log(`(m) simulator: a fixed window of ${quota.requests} per ${quota.windowMs / 1000} s, ${headers === 'none' ? 'Retry-After only' : 'RateLimit headers'}, configured ${configured}/s, ${windowMs / 1000} s`);
  const target = await fixedWindowTarget({ quota, headers, latencyMs: LATENCY_MS });
  try {
    const run = await drive(target, { rate: { requestsPerSecond: configured }, concurrency: 8 }, ENDLESS, windowMs);
    const ok = run.stats.requests.byStatus['200'] ?? 0;
    const windowsRequests = quota.requests * (run.seconds * 1000 / quota.windowMs);
    return {
      server: 'simulator',
      limiter: target.limiter,
      latencyMs: LATENCY_MS,
      configured: { ratePerSecond: configured, concurrency: 8 },
      windowSeconds: round(run.seconds, 2),
      responses: { total: run.stats.requests.total, byStatus: run.stats.requests.byStatus },
      serverSide: { byStatus: run.serverStatuses },
      successes: ok,
      windowsRequests: round(windowsRequests, 1),
      achievedOverWindows: ratio(ok, windowsRequests),
      share429: share429(run.stats),
      pauses: { ...run.recording.pauses, requestedMs: round(run.recording.pauses.requestedMs, 0) },
      perSecond: run.recording.perSecond,
    };
  } finally {
    await target.close();
  }
}
