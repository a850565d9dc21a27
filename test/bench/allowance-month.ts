// A month in virtual time (issue 41): a pipeline scheduled at 06:00 every day, with an allowance of 1 000 credits a
// month spread evenly (`spread: 'even'`), run by the worker's loop over November 2026's 30 occurrences against the
// simulator, over real sockets, its SQLite state store's clock the virtual one (test/recurring/virtual-worker.ts).
// Its plan (1 500 pages) is more than the month allows: each occurrence spends its share and the next takes the same
// run up where it stopped. On the 10th, another pipeline on the same key and state file spends 150 credits by hand:
// the occurrences after it share what is left. Prints one JSON object: each day's share, credits and what was left of
// the month, the month's total (≤ the allowance), and whether every page was paid once.
// `leftOfMonth`: what was left of the key's month after that day, every pipeline's spend counted.
// `node scripts/with-node.mjs test/bench/allowance-month.ts` (some 10 s).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { definePipeline, normalize, run, searchPages, toSqlite } from '../../src/index.ts';
import { systemClock, virtualClock } from '../../src/schedule/clock.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { virtualWorker } from '../recurring/virtual-worker.ts';

const KEY = 'sk_month_0123456789abcdef';
const MONTH = { start: Date.parse('2026-11-01T00:00:00.000Z'), end: Date.parse('2026-12-01T00:00:00.000Z') };
const ALLOWANCE = { credits: 1000, per: 'month', timezone: 'UTC', spread: 'even' } as const;
const OTHER = { day: Date.parse('2026-11-10T12:00:00.000Z'), credits: 150 };

const dir = mkdtempSync(join(tmpdir(), 'webdata-month-'));
const state = join(dir, 'month.sqlite');
const began = Date.now();
const sim = await startSimulator({ keys: [{ key: KEY, name: 'main' }] });
try {
  const clock = virtualClock(0, MONTH.start);
  const options = { baseUrl: sim.url, apiKey: KEY, env: {} };
  const queries = Array.from({ length: 100 }, (_, i) => `product ${i + 1}`);
  await using worker = await virtualWorker(
    clock,
    {
      name: 'monthly',
      source: searchPages({ queries, countries: ['us', 'gb', 'de'], maxPages: 5 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: state, table: 'results' })],
      schedule: { cron: '0 6 * * *', timezone: 'UTC' },
      allowance: ALLOWANCE,
      rate: { concurrency: 4 },
    },
    options,
  );
  await worker.until(OTHER.day);
  // Another pipeline on the key, by hand, declaring the same allowance, with a budget of its own; virtual time held
  // meanwhile (taken before anything else happens: a timer of the loop's would fire at the next turn).
  const release = clock.hold?.();
  const at = clock.epoch?.() as number;
  const from = Date.now();
  const other = await run(
    definePipeline({
      name: 'by-hand',
      source: searchPages({ queries: queries.map((q) => `${q} review`), countries: ['us'], maxPages: 5 }),
      stages: [normalize()],
      sinks: [toSqlite({ path: join(dir, 'by-hand.sqlite'), table: 'results' })],
      state: { path: state },
      allowance: { credits: ALLOWANCE.credits, per: ALLOWANCE.per, timezone: ALLOWANCE.timezone },
      budget: { maxCredits: OTHER.credits },
    }),
    { ...options, clock: { ...systemClock, epoch: () => at + (Date.now() - from) } },
  );
  release?.();
  await worker.until(MONTH.end);
  await worker.stop();

  // The ledger, by the day its rows were written (the runs' clocks: virtual days) and pipeline.
  const db = new Database(state, { readonly: true });
  const ledger = db.prepare("SELECT substr(at, 1, 10) AS day, pipeline, sum(credits) AS credits FROM spend WHERE period = '2026-11' GROUP BY 1, 2").all() as { day: string; pipeline: string; credits: number }[];
  const spentBy = db.prepare("SELECT pipeline, sum(credits) AS credits FROM spend WHERE period = '2026-11' GROUP BY pipeline").all() as { pipeline: string; credits: number }[];
  const results = (db.prepare('SELECT count(DISTINCT query || country || page) AS pages FROM results').get() as { pages: number }).pages;
  db.close();
  let left = ALLOWANCE.credits;
  const days = worker.runs.map((each) => {
    const day = new Date(each.at).toISOString().slice(0, 10);
    const start = each.events.find((event) => event.type === 'start');
    const note = start?.type === 'start' ? (start.notes.find((line) => line.includes('share is')) ?? '') : '';
    const credits = ledger.find((row) => row.day === day && row.pipeline === 'monthly')?.credits ?? 0;
    const byHand = ledger.find((row) => row.day === day && row.pipeline === 'by-hand')?.credits ?? 0;
    left -= credits + byHand;
    return {
      day,
      share: Number(/share is (\d+) credit/.exec(note)?.[1] ?? Number.NaN),
      credits,
      ...(byHand > 0 ? { byHand } : {}),
      leftOfMonth: left,
      status: each.summary?.status ?? each.failure,
    };
  });
  const total = spentBy.reduce((sum, row) => sum + row.credits, 0);
  const paid = sim.log().filter((entry) => entry.status === 200);
  const report = {
    pipeline: 'monthly',
    schedule: '0 6 * * * (UTC)',
    allowance: ALLOWANCE,
    month: '2026-11',
    occurrences: days.length,
    runs: new Set(worker.runs.map((each) => each.summary?.runId)).size,
    byHand: { day: '2026-11-10', pipeline: 'by-hand', credits: other.credits.spent, status: other.status },
    spentByPipeline: Object.fromEntries(spentBy.map((row) => [row.pipeline, row.credits])),
    total,
    withinAllowance: total <= ALLOWANCE.credits,
    simulatorCharged: sim.stats().credits.main?.debited ?? 0,
    pagesExact: { paid: paid.length, distinctPaid: new Set(paid.map((entry) => entry.query)).size, monthlyResultsPages: results },
    wallSeconds: Math.round((Date.now() - began) / 100) / 10,
  };
  // One JSON object; a day to a line, to quote.
  const head = JSON.stringify(report, null, 2).replace(/\n}$/, ',');
  process.stdout.write(`${head}\n  "days": [\n${days.map((day) => `    ${JSON.stringify(day)}`).join(',\n')}\n  ]\n}\n`);
} finally {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
}
