// Spending where answers change (issue 42), with real runs: the month of refresh-month.ts played by `run()` — 30 daily
// runs of 300 keywords × 1 country × up to 5 pages of 10, one tracked domain each (chosen as refresh-world.ts chooses
// it, so that the figures compare with the policy replay's), a SQLite state store, the simulator on its days over
// real sockets (`sim.advanceDay()` between runs). Three months, each in a fresh directory:
//   - the refresh planner: `refresh: { depth: 'until-found', priority: 'changes' }`, `budget.maxCredits` 40 % of a
//     full day's credits a run (the first run included);
//   - depth until found alone (every series, every run);
//   - a full harvest (every page of every series): what the other two are a share of.
// A move is refresh-world.ts's (a tracked domain changing rank by 3 or more or entering or leaving the 50 ranks, days
// 1 to 29, by the ground truth); it is caught when the run of its day completed its series (the state store's row:
// ended by a stop rule). Credits are the runs' summaries'. Prints one JSON object; beside it, the policy replay's
// figures for the same seed (refresh-month.ts).
// `node scripts/with-node.mjs test/bench/refresh-month-runs.ts [--seed N] [--keywords N] [--days N] [--share 0.4]`
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { normalize, run, searchPages, toSqlite, type PipelineDefinition, type RunSummary } from '../../src/index.ts';
import { COMPLETE_REASONS, type SeriesEndReason } from '../../src/sources/source.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { buildWorld, fullDay, type World } from './refresh-world.ts';
import { refreshMonth } from './refresh-month.ts';

const KEY = 'sk_refresh_0123456789abcdef';

interface MonthOptions {
  seed: number;
  keywords: number;
  days: number;
  share: number;
}

type Mode = 'planner' | 'untilFound' | 'full';

/** One month of daily runs in `mode`: each run's summary, and the state store's series rows by run. */
async function month(world: World, options: MonthOptions, mode: Mode, budget: number | undefined) {
  const dir = mkdtempSync(join(tmpdir(), `webdata-refresh-${mode}-`));
  const sim = await startSimulator({ seed: options.seed, day: 0, keys: [{ key: KEY, name: 'main' }] });
  const began = Date.now();
  try {
    const file = join(dir, 'keywords.csv');
    writeFileSync(file, `keyword,site\n${world.series.map((s, i) => `keyword ${i + 1},${s.domain}`).join('\n')}\n`);
    const definition = {
      name: 'refresh-month',
      source: searchPages({ queriesFile: file, countries: ['us'], maxPages: 5, count: 10 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: join(dir, 'out.sqlite') })],
      track: { column: 'site' },
      refresh: mode === 'planner' ? { depth: 'until-found', priority: 'changes' } : mode === 'untilFound' ? { depth: 'until-found' } : { depth: 'full' },
      rate: { concurrency: 8 },
      ...(budget === undefined ? {} : { budget: { maxCredits: budget } }),
    } as PipelineDefinition;
    const summaries: RunSummary[] = [];
    for (let day = 0; day < options.days; day++) {
      if (day > 0) sim.advanceDay();
      summaries.push(await run(definition, { baseUrl: sim.url, apiKey: KEY, env: {} }));
    }
    const db = new Database(join(dir, 'out.sqlite'), { readonly: true });
    const rows = db.prepare('SELECT run_id AS runId, query, status, reason, pages FROM series').all() as { runId: string; query: string; status: string; reason: string | null; pages: number }[];
    db.close();
    return { summaries, rows, seconds: Math.round((Date.now() - began) / 100) / 10, requests: sim.stats().requests };
  } finally {
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;

/** A month's figures: credits, moves caught (by the ground truth), the longest run of skips, the promise broken. */
function figures(world: World, played: Awaited<ReturnType<typeof month>>, fullMonth: number) {
  const complete = new Set(played.rows.filter((r) => r.status === 'ended' && COMPLETE_REASONS.has(r.reason as SeriesEndReason)).map((r) => `${r.runId}|${r.query}`));
  const skipped = new Set(played.rows.filter((r) => r.reason === 'skipped').map((r) => `${r.runId}|${r.query}`));
  let moves = 0;
  let caught = 0;
  let maxSkipped = 0;
  world.series.forEach((series, i) => {
    const query = `keyword ${i + 1}`;
    let streak = 0;
    played.summaries.forEach((summary, day) => {
      if (series.moves[day]) {
        moves += 1;
        if (complete.has(`${summary.runId}|${query}`)) caught += 1;
      }
      streak = skipped.has(`${summary.runId}|${query}`) ? streak + 1 : 0;
      maxSkipped = Math.max(maxSkipped, streak);
    });
  });
  const credits = played.summaries.reduce((sum, s) => sum + s.credits.spent, 0);
  return {
    credits,
    shareOfFullHarvest: round(credits / fullMonth),
    moves,
    caught,
    caughtShare: moves === 0 ? null : round(caught / moves),
    maxRunsSkipped: maxSkipped,
    statuses: [...new Set(played.summaries.map((s) => s.status))],
    promiseBroken: played.summaries.reduce((sum, s) => sum + (s.refresh?.promiseBroken ?? 0), 0),
    replanned: played.summaries.reduce((sum, s) => sum + (s.refresh?.chosen.replanned ?? 0), 0),
    maxCreditsInARun: Math.max(...played.summaries.map((s) => s.credits.spent)),
    seconds: played.seconds,
    requests: played.requests,
  };
}

/** The month with real runs, and the policy replay's figures for the same seed beside it. */
export async function refreshMonthRuns(options: MonthOptions) {
  const world = buildWorld(options.seed, options.keywords, options.days);
  const day = fullDay(world);
  const budget = Math.floor(day * options.share);
  const full = await month(world, options, 'full', undefined);
  const fullMonth = full.summaries.reduce((sum, s) => sum + s.credits.spent, 0);
  const untilFound = figures(world, await month(world, options, 'untilFound', undefined), fullMonth);
  const planner = figures(world, await month(world, options, 'planner', budget), fullMonth);
  const replay = options.keywords === 300 && options.days === 30 ? refreshMonth(options.seed) : undefined;
  const policy = replay?.budgets.find((b) => b.share === options.share);
  return {
    seed: options.seed,
    keywords: options.keywords,
    days: options.days,
    share: options.share,
    pagesPerRun: budget,
    fullHarvest: { creditsPerDay: day, credits: fullMonth, worldCredits: day * options.days, seconds: full.seconds },
    untilFound: { ...untilFound, saved: round(1 - untilFound.credits / fullMonth) },
    planner,
    ...(policy ? { policyReplay: { planner: policy.planner.caughtShare, roundRobin: policy.roundRobin.caughtShare, roundRobinFullDepth: policy.roundRobinFullDepth.caughtShare, oracle: policy.oracle.caughtShare } } : {}),
  };
}

/** `--name value` of the command line, as a number. */
function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? Number(process.argv[at + 1]) : fallback;
}

if (import.meta.main) {
  const result = await refreshMonthRuns({ seed: flag('seed', 1), keywords: flag('keywords', 300), days: flag('days', 30), share: flag('share', 0.4) });
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
