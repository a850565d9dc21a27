// `npm run bench [-- --quick] [-- --scale]`: the scheduler against rate-limited and faulty servers, on the real clock; then
// throughput: stages and sinks against raw better-sqlite3 and csv-stringify, the pipeline against a bare fetch loop.
// Figures go to stdout as one JSON object (so that runs can be compared by a script); progress goes to stderr.
import { cpus, totalmem } from 'node:os';
import { nginxAvailable, nginxVersion, NGINX_BINARY } from './nginx.ts';
import { scenarioBudget, scenarioFixedWindow, scenarioRateAboveLimit, scenarioRateAtLimit, scenarioServerErrors } from './scenarios.ts';
import { benchPostgres, scenarioPostgresEndToEnd, scenarioPostgresSink } from './postgres.ts';
import { peakRssMb, scenarioEndToEnd, scenarioSinks } from './throughput.ts';
import { AIMED_WAYS, scenarioMemory } from './memory.ts';
import { scenarioLongSeries } from './long-series.ts';
import { scenarioInstrumentation } from './instrumentation.ts';
import { scenarioKeyPool, scenarioKeyRevoked, scenarioOneKey } from './key-pools.ts';
import { scenarioAllowanceLedger } from './allowance-ledger.ts';
import { scenarioRefreshMonth } from './refresh-month.ts';
import { refreshMonthRuns } from './refresh-month-runs.ts';
import { scenarioSharedLimitsOverhead, scenarioWorkersAboveLimit, scenarioWorkersBudget, scenarioWorkersThroughput } from './distributed.ts';
import { scenarioPlanScale } from './plan-scale.ts';
import { scenarioFeedWindow } from './feed-window.ts';

const quick = process.argv.includes('--quick');
// The month with real runs (issue 42) takes some 7 minutes: a part of its own, asked for by this flag.
const withRefreshRuns = process.argv.includes('--refresh-runs');
const windowMs = quick ? 8_000 : 30_000;
// Planning at scale (issue 43, item 1): fleets of 8 on plans of 1,000,000 and 200,000 series, some 5 minutes and 4 GB of
// database: a part of its own, asked for by this flag.
const withScale = process.argv.includes('--scale');

/** Indented JSON, but with arrays of plain values on one line: per-second series stay readable. */
function compactJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(/\[\s*\n([^[\]{}]*?)\n\s*\]/g, (_, inner: string) => `[${inner.split('\n').map((line) => line.trim()).join(' ')}]`);
}

const machine = () => {
  const list = cpus();
  return {
    cpu: list[0]?.model ?? 'unknown',
    cpus: list.length,
    totalMemoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    platform: `${process.platform}-${process.arch}`,
  };
};

const started = new Date();
const withNginx = nginxAvailable();
const skipped = { skipped: true, note: `${NGINX_BINARY} not found: nginx scenarios skipped` };

const a_simulator = await scenarioRateAtLimit('simulator', windowMs);
const a_nginx = withNginx ? await scenarioRateAtLimit('nginx', windowMs) : skipped;
const b_simulator = await scenarioRateAboveLimit('simulator', windowMs);
const b_nginx = withNginx ? await scenarioRateAboveLimit('nginx', windowMs) : skipped;
// Fixed windows (issue 18): 50 per 5 s, configured at 3× its average, with RateLimit headers and with Retry-After only.
const m_fixedWindowHeaders = await scenarioFixedWindow('ietf', windowMs);
const m_fixedWindowRetryAfter = await scenarioFixedWindow('none', windowMs);
const c_simulator = await scenarioServerErrors();
const d_simulator = await scenarioBudget();
// Key pools (issue 40), from the command line as a user runs them: three keys behind nginx zones of 8, 4 and 2 r/s
// they are not told, then the same pipeline again on its state; a key revoked mid-run; one key without a pool.
const q_keyPool = withNginx ? await scenarioKeyPool() : skipped;
const r_keyRevoked = withNginx ? await scenarioKeyRevoked() : skipped;
const s_oneKey = withNginx ? await scenarioOneKey() : skipped;
// An allowance's cost per page (issue 41): the same pipeline with and without one, spawn to exit, alternately.
const t_allowanceLedger = await scenarioAllowanceLedger(quick ? 1000 : 5000, quick ? 3 : 4);
// Spending where answers change (issue 42): a month of daily runs replayed at the policy level on the simulator's
// days (no HTTP): the refresh planner against round-robin and the oracle at the same budget (quick: one seed).
const u_refreshMonth = scenarioRefreshMonth(quick);
// The same month played by 30 daily run()s over real sockets (seed 1): the planner at 40 % of a full day, depth until
// found alone and a full harvest (refresh-month-runs.ts).
const v_refreshMonthRuns = withRefreshRuns
  ? await refreshMonthRuns({ seed: 1, keywords: 300, days: 30, share: 0.4 })
  : { skipped: true, note: 'a part of its own (some 7 minutes): npm run -s bench -- --refresh-runs, or node scripts/with-node.mjs test/bench/refresh-month-runs.ts' };
// 600 queries × 5 pages × 100 items (quick: 40 queries).
const throughputQueries = quick ? 40 : 600;
const e_sinks = await scenarioSinks(throughputQueries);
const f_measured = await scenarioEndToEnd(throughputQueries);
// What any tool must at least do to store these items, on one thread: fetch them (the bare loop), insert them into
// the same indexed table (raw better-sqlite3) and write them as CSV (csv-stringify), from the figures measured above.
// The pipeline's distance to it is its own overhead; the rest of its distance to the bare loop is storage's.
const microsPerItem = (perSecond: number) => 1e6 / perSecond;
const storeBound = Math.round(
  1e6 /
    (microsPerItem(f_measured.itemsPerSecond.bareFetchLoop) +
      microsPerItem(e_sinks.itemsPerSecond.rawBetterSqlite3SameTable) +
      microsPerItem(e_sinks.itemsPerSecond.csvStringifySyncByPage)),
);
const f_endToEnd = {
  ...f_measured,
  fetchInsertWriteBound: { itemsPerSecond: storeBound, pipelineOverIt: Math.round((f_measured.itemsPerSecond.pipelineServed / storeBound) * 1000) / 1000 },
};

// The same items as series of 5, 100 and 500 pages (issue 18): a series' stage state grows with it, and each page
// writes what it changed, so a long series should cost little more per item than a short one.
const o_longSeries = await scenarioLongSeries(quick ? 20_000 : 100_000, [5, 100, 500]);

// The OpenTelemetry instrumentation's cost (issue 31): the same run with no SDK and with the SDK (metrics and spans).
const p_instrumentation = await scenarioInstrumentation(quick ? 40 : 200, quick ? 2 : 5);

// Memory with no flags or environment (issue 18): peak RSS of a run started each way a user starts one
// (`node test/bench/memory.ts 5000000 cli` for the 5-million figure).
const n_memory = await scenarioMemory(quick ? 200_000 : 1_000_000);

// PostgreSQL: a throwaway cluster from the machine's binaries (or WEBDATA_BENCH_DATABASE_URL), skipped without either.
const postgres = await benchPostgres();
const noPostgres = { skipped: true, note: 'no PostgreSQL (install postgresql, or set WEBDATA_BENCH_DATABASE_URL): PostgreSQL scenarios skipped' };
let g_postgresSink: Awaited<ReturnType<typeof scenarioPostgresSink>> | typeof noPostgres = noPostgres;
let h_postgresEndToEnd: Awaited<ReturnType<typeof scenarioPostgresEndToEnd>> | typeof noPostgres = noPostgres;
let i_workers: Awaited<ReturnType<typeof scenarioWorkersThroughput>> | typeof noPostgres = noPostgres;
let j_workersAboveLimit: Awaited<ReturnType<typeof scenarioWorkersAboveLimit>> | typeof noPostgres | typeof skipped = noPostgres;
let k_workersBudget: Awaited<ReturnType<typeof scenarioWorkersBudget>> | typeof noPostgres = noPostgres;
let l_sharedLimits: Awaited<ReturnType<typeof scenarioSharedLimitsOverhead>> | typeof noPostgres = noPostgres;
const scaleApart = { skipped: true, note: 'a part of its own (some 5 minutes): npm run -s bench -- --scale, or node scripts/with-node.mjs test/bench/plan-scale.ts 1000000' };
let w_planScale: { million: Awaited<ReturnType<typeof scenarioPlanScale>>; twoHundredThousand: Awaited<ReturnType<typeof scenarioPlanScale>>; feedWindow: Awaited<ReturnType<typeof scenarioFeedWindow>> } | typeof noPostgres | typeof scaleApart = withScale ? noPostgres : scaleApart;
if (postgres) {
  try {
    g_postgresSink = await scenarioPostgresSink(postgres.admin, throughputQueries);
    h_postgresEndToEnd = await scenarioPostgresEndToEnd(postgres.admin, throughputQueries);
    i_workers = await scenarioWorkersThroughput(postgres.admin, quick);
    // nginx is the limiter here (a leaky bucket of someone else's).
    j_workersAboveLimit = withNginx ? await scenarioWorkersAboveLimit(postgres.admin, quick ? 'shared' : 'both') : skipped;
    k_workersBudget = await scenarioWorkersBudget(postgres.admin);
    l_sharedLimits = await scenarioSharedLimitsOverhead(postgres.admin);
    if (withScale) {
      w_planScale = {
        million: await scenarioPlanScale(postgres.admin, 1_000_000),
        twoHundredThousand: await scenarioPlanScale(postgres.admin, 200_000),
        feedWindow: await scenarioFeedWindow(postgres.admin, 200_000, 5_000),
      };
    }
  } finally {
    postgres.close();
  }
}

type Measured = { achievedOverServerLimit: number | null; share429: number | null };
const measured = (s: Measured | typeof skipped): s is Measured => !('skipped' in s);

// Goals are reported beside the figures, never enforced: the exit code says only whether the benchmark ran.
const goals: { scenario: string; goal: string; value: unknown; met: boolean }[] = [];
for (const [name, scenario, minRatio, max429] of [
  ['a_simulator', a_simulator, 0.98, 0.01],
  ['a_nginx', a_nginx, 0.98, 0.01],
  // (b): issue 33's aim for the first seconds at an unknown limit (issue 18's was 0.95 and 2 %).
  ['b_simulator', b_simulator, 0.97, 0.01],
  ['b_nginx', b_nginx, 0.97, 0.01],
] as const) {
  if (!measured(scenario)) continue;
  const achieved = scenario.achievedOverServerLimit ?? 0;
  const limited = scenario.share429 ?? 1;
  goals.push({ scenario: name, goal: `achieved / server limit >= ${minRatio}`, value: achieved, met: achieved >= minRatio });
  goals.push({ scenario: name, goal: `429 share <= ${max429 * 100} %`, value: limited, met: limited <= max429 });
}
for (const [name, scenario, minRatio, max429] of [
  ['m_fixedWindowHeaders', m_fixedWindowHeaders, 0.97, 0.01],
  ['m_fixedWindowRetryAfter', m_fixedWindowRetryAfter, 0.95, 0.03],
] as const) {
  const used = scenario.achievedOverWindows ?? 0;
  const limited = scenario.share429 ?? 1;
  goals.push({ scenario: name, goal: `accepted / the windows' requests >= ${minRatio}`, value: used, met: used >= minRatio });
  goals.push({ scenario: name, goal: `429 share <= ${max429 * 100} %`, value: limited, met: limited <= max429 });
}
if (!('skipped' in q_keyPool)) {
  const { first, again } = q_keyPool;
  goals.push({ scenario: 'q_keyPool', goal: 'three keys at 8, 4, 2 r/s unknown to the run: accepted / their summed 14 r/s >= 0.95 (nginx\'s log)', value: first.nginx.achievedOverSummedLimits, met: first.nginx.achievedOverSummedLimits >= 0.95 });
  goals.push({ scenario: 'q_keyPool', goal: 'the same: 429 share <= 2 %', value: first.nginx.share429, met: first.nginx.share429 <= 0.02 });
  const again429 = again.nginx.byStatus['429'] ?? 0;
  goals.push({ scenario: 'q_keyPool', goal: 'the same pipeline again on its state (limits remembered): <= 1 429', value: again429, met: again429 <= 1 });
  goals.push({ scenario: 'q_keyPool', goal: 'the same again: accepted / the summed limits >= 0.97', value: again.nginx.achievedOverSummedLimits, met: again.nginx.achievedOverSummedLimits >= 0.97 });
}
if (!('skipped' in r_keyRevoked)) {
  const r = r_keyRevoked;
  goals.push({
    scenario: 'r_keyRevoked',
    goal: 'a key revoked mid-run: exit 0, every page fetched, its 401s <= its concurrency (4)',
    value: { exitCode: r.exitCode, pagesFetched: r.pagesFetched, lost401: r.lost401 },
    met: r.exitCode === 0 && r.pagesFetched === r.plannedPages && r.lost401 <= 4,
  });
}
goals.push({
  scenario: 'c_simulator',
  goal: 'every planned page fetched; credits spent = pages fetched = credits debited',
  value: { planned: c_simulator.work.planned, fetched: c_simulator.fetched, spent: c_simulator.creditsSpent, debited: c_simulator.creditsDebitedBySimulator },
  met: c_simulator.allFetched && c_simulator.spentEqualsFetched && c_simulator.spentEqualsDebited,
});
goals.push({
  scenario: 'd_simulator',
  goal: 'credits spent / min(budget, pages) = 1.0, never above the budget (scheduler and simulator)',
  value: { spentOverNeeded: d_simulator.spentOverNeeded, debitedOverNeeded: d_simulator.debitedOverNeeded, maxSpentPlusReservedSeen: d_simulator.maxSpentPlusReservedSeen },
  met: d_simulator.spentOverNeeded === 1 && d_simulator.debitedOverNeeded === 1 && d_simulator.neverAboveBudget,
});

{
  const aim = u_refreshMonth.summary.find((s) => s.share === 0.4);
  if (aim) {
    goals.push({ scenario: 'u_refreshMonth', goal: 'the planner with depth until found catches >= 90 % of moves at <= 40 % of a full daily harvest\'s credits (every seed)', value: { caught: aim.plannerCaught.min, credits: aim.maxShareOfFullHarvest }, met: aim.plannerCaught.min >= 0.9 && aim.maxShareOfFullHarvest <= 0.4 });
    // Round-robin with depth until found already catches 85-95 % at this budget: no policy, the oracle included, can
    // catch 1.5 × that (docs/benchmarks.md#spending-where-answers-change). Reported, not hidden.
    goals.push({ scenario: 'u_refreshMonth', goal: 'the planner >= 1.5 × the moves round-robin (depth until found) catches at the same credits (every seed)', value: aim.plannerOverRoundRobin.min, met: aim.plannerOverRoundRobin.min >= 1.5 });
    goals.push({ scenario: 'u_refreshMonth', goal: 'the planner >= 1.5 × the moves round-robin (every page) catches at the same credits (every seed)', value: aim.plannerOverRoundRobinFullDepth.min, met: aim.plannerOverRoundRobinFullDepth.min >= 1.5 });
  }
}
if (!('skipped' in v_refreshMonthRuns)) {
  const { planner } = v_refreshMonthRuns;
  goals.push({ scenario: 'v_refreshMonthRuns', goal: 'real runs: the planner with depth until found catches >= 90 % of moves at <= 40 % of a full harvest\'s credits', value: { caught: planner.caughtShare, credits: planner.shareOfFullHarvest }, met: (planner.caughtShare ?? 0) >= 0.9 && planner.shareOfFullHarvest <= 0.4 });
}
goals.push({
  scenario: 'f_endToEnd',
  goal: 'pipeline items/s >= 0.5 × a bare fetch loop of the same pages',
  value: f_endToEnd.pipelineOverBare,
  met: f_endToEnd.pipelineOverBare >= 0.5,
});

if (!('skipped' in g_postgresSink)) {
  goals.push({
    scenario: 'g_postgresSink',
    goal: 'pipeline → PostgreSQL items/s >= 0.8 × the faster raw pg method (multi-row INSERT, COPY)',
    value: g_postgresSink.pipelineOverFastestRaw,
    met: g_postgresSink.pipelineOverFastestRaw >= 0.8,
  });
}

goals.push({
  scenario: 'o_longSeries',
  goal: 'items/s in series of 500 pages >= 0.7 × in series of 5',
  value: o_longSeries.longestOverShortest,
  met: o_longSeries.longestOverShortest >= 0.7,
});

goals.push({
  scenario: 'p_instrumentation',
  goal: 'the OpenTelemetry SDK (metrics and spans) under 3 % of a run, with none under 0.1 %: the CPU of the calls per event against the run\'s time per event',
  value: { sdkShare: p_instrumentation.sdk.shareOfRunTime, noSdkShare: p_instrumentation.noSdk.shareOfRunTime, sdkOverNoSdkItemsPerSecond: p_instrumentation.sdkOverNoSdk },
  met: p_instrumentation.sdk.shareOfRunTime < 0.03 && p_instrumentation.noSdk.shareOfRunTime < 0.001,
});

for (const way of AIMED_WAYS) {
  const peak = n_memory[way]?.peakRssMb ?? Number.POSITIVE_INFINITY;
  goals.push({ scenario: 'n_memory', goal: `${way}: peak RSS < 250 MB at ${n_memory.items} items, no flags or environment`, value: peak, met: peak < 250 });
}

if (!('skipped' in i_workers)) {
  const { workers3, workers4 } = i_workers.speedup as Record<string, number | undefined>;
  if (workers3 !== undefined) goals.push({ scenario: 'i_workers', goal: '3 workers finish 360 latency-bound pages >= 2.6 × faster than 1 (spawn to exit)', value: workers3, met: workers3 >= 2.6 });
  if (workers4 !== undefined) goals.push({ scenario: 'i_workers', goal: '4 workers finish them >= 3.4 × faster than 1 (spawn to exit)', value: workers4, met: workers4 >= 3.4 });
  const joined = i_workers.joinMs.firstRequest;
  goals.push({ scenario: 'i_workers', goal: 'a worker joining a run at work: spawn to first request < 1 s', value: joined, met: joined !== null && joined < 1000 });
}
if (!('skipped' in j_workersAboveLimit)) {
  // Issue 43, items 6 and 7: spawn to exit, 429s from nginx's log; the second run on the same state (remembered limits).
  const { first, second } = j_workersAboveLimit.shared ?? {};
  if (first) goals.push({ scenario: 'j_workersAboveLimit', goal: '3 workers, first run: pages / spawn-to-exit / nginx limit >= 0.95', value: first.achievedOverLimit, met: first.achievedOverLimit >= 0.95 });
  if (first) goals.push({ scenario: 'j_workersAboveLimit', goal: '3 workers, first run: <= 3 429s (one limit discovered)', value: first.rejected, met: first.rejected <= 3 });
  if (second) goals.push({ scenario: 'j_workersAboveLimit', goal: '3 workers, second run (remembered limit): <= 1 429', value: second.rejected, met: second.rejected <= 1 });
  if (second) goals.push({ scenario: 'j_workersAboveLimit', goal: '3 workers, second run: pages / spawn-to-exit / nginx limit >= 0.95', value: second.achievedOverLimit, met: second.achievedOverLimit >= 0.95 });
}
if (!('skipped' in k_workersBudget)) {
  goals.push({ scenario: 'k_workersBudget', goal: 'a budget of 150 over 4 workers: debited exactly 150', value: k_workersBudget.debited, met: k_workersBudget.exact });
}

if (!('skipped' in w_planScale)) {
  const { million, twoHundredThousand, feedWindow } = w_planScale;
  goals.push({ scenario: 'w_planScale', goal: '1,000,000 series planned in a distributed run in < 60 s', value: million.planS, met: million.planS !== null && million.planS < 60 });
  goals.push({ scenario: 'w_planScale', goal: '1,000,000 series: every worker\'s first request within 1 s of the plan\'s end', value: million.lastFirstRequestAfterPlanS, met: million.lastFirstRequestAfterPlanS !== null && million.lastFirstRequestAfterPlanS <= 1 });
  const first200k = twoHundredThousand.firstRequestS.every((t) => t !== null) ? Math.max(...(twoHundredThousand.firstRequestS as number[])) : null;
  goals.push({ scenario: 'w_planScale', goal: '200,000 series: every worker\'s first request within 30 s of its spawn', value: first200k, met: first200k !== null && first200k <= 30 });
  goals.push({ scenario: 'w_planScale', goal: 'every worker exits 0 (1,000,000 and 200,000 series)', value: [...million.codes, ...twoHundredThousand.codes], met: [...million.codes, ...twoHundredThousand.codes].every((code) => code === 0) });
  goals.push({ scenario: 'w_planScale', goal: 'a worker\'s feed holds a window of the plan: < 10 MB of heap after reading past 195,000 series, and finds one handed back', value: feedWindow.heldMb, met: feedWindow.heldMb < 10 && feedWindow.handedBackFound });
}

const report = {
  benchmark: 'webdata-etl',
  date: started.toISOString(),
  node: process.version,
  machine: machine(),
  nginx: withNginx ? { binary: NGINX_BINARY, version: await nginxVersion() } : { binary: null, note: skipped.note },
  mode: quick ? 'quick' : 'full',
  windowSeconds: windowMs / 1000,
  durationSeconds: Math.round((Date.now() - started.getTime()) / 100) / 10,
  goals,
  peakRssMb: peakRssMb(),
  scenarios: { a_simulator, a_nginx, b_simulator, b_nginx, m_fixedWindowHeaders, m_fixedWindowRetryAfter, q_keyPool, r_keyRevoked, s_oneKey, t_allowanceLedger, u_refreshMonth, v_refreshMonthRuns, c_simulator, d_simulator, e_sinks, f_endToEnd, o_longSeries, p_instrumentation, n_memory, g_postgresSink, h_postgresEndToEnd, i_workers, j_workersAboveLimit, k_workersBudget, l_sharedLimits, w_planScale },
};
process.stdout.write(`${compactJson(report)}\n`);
