// Crash-resume fuzzing: each trial runs one pipeline against one simulator, interrupts it again and again at
// seeded random places (a crash point, a SIGKILL at a random moment, or a graceful SIGINT), resumes it after each
// interruption until an invocation gets to the end on its own, and then checks that the outputs are exactly those
// of an uninterrupted run and that no page was paid twice beyond the requests in flight (sent, not yet committed)
// at each interruption.
//
// Sizes: WEBDATA_FUZZ_TRIALS trials (default 8), seeds WEBDATA_FUZZ_FIRST (default 1) onwards;
// WEBDATA_FUZZ_SEED=<seed> replays one trial. `npm run test:long` runs 60. WEBDATA_FUZZ_VERBOSE=1 prints each
// trial's interruptions. A trial's seed decides its setup and its interruptions; the moments of timed signals are
// real time, so a replay sends them at the same delays, not necessarily at the same point of the run.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { csvRows, sqliteRows, workdir } from '../pipeline-helpers.ts';
import { type ChildResult, runChild, stableCsv, stableJsonl, stableSqlite } from './resume-helpers.ts';

const TRIALS = Number(process.env.WEBDATA_FUZZ_TRIALS ?? 8);
const FIRST = Number(process.env.WEBDATA_FUZZ_FIRST ?? 1);
const REPLAY = process.env.WEBDATA_FUZZ_SEED;
const VERBOSE = process.env.WEBDATA_FUZZ_VERBOSE === '1';
const SEEDS = REPLAY ? [Number(REPLAY)] : Array.from({ length: TRIALS }, (_, index) => FIRST + index);

/** Invocations interrupted at most; then one last one runs undisturbed. */
const MAX_INTERRUPTED = 15;

type SinkKind = 'sqlite' | 'sqlite2' | 'csv' | 'csv2' | 'jsonl';
// `sqlite` shares the state store's file and commits inside the page's transaction, file sinks commit with it
// (bytes written before, checkpoint inside); `sqlite2`, in a file of its own, takes each page after the commit
// and is re-delivered from the journal what it lacks.
const SINK_SETS: readonly (readonly SinkKind[])[] = [
  ['sqlite', 'csv'],
  ['sqlite', 'csv', 'csv2'],
  ['sqlite', 'jsonl'],
  ['sqlite', 'csv', 'sqlite2'],
  ['sqlite', 'jsonl', 'sqlite2'],
];
const PLANS = [
  { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 4 },
  { queries: ['milk frother', 'tamper'], countries: ['us', 'de', 'fr'], maxPages: 3 },
  { queries: ['espresso', 'scale', 'descaler', 'portafilter'], countries: ['us'], maxPages: 5 },
] as const;
const SIM_SEEDS = [21, 37] as const;
const POINTS = ['page-transaction', 'after-commit', 'file-before-checkpoint', 'between-sinks'] as const;
const FILES: Record<SinkKind, string> = { sqlite: 'out.sqlite', sqlite2: 'out2.sqlite', csv: 'out.csv', csv2: 'out2.csv', jsonl: 'out.jsonl' };

type Interruption =
  | { kind: 'crash'; point: (typeof POINTS)[number]; n: number }
  /**
   * A signal this long after the first page of the invocation, or (`early`) after its start: while it loads, opens
   * its outputs, cuts files back, takes the lease over and re-delivers from the journal.
   */
  | { kind: 'SIGKILL' | 'SIGINT'; afterMs: number; early?: boolean };

interface Trial {
  seed: number;
  sinks: readonly SinkKind[];
  concurrency: number;
  latencyMs: { min: number; max: number };
  planIndex: number;
  plan: (typeof PLANS)[number];
  simSeed: number;
  /** The interruption of the n-th invocation (drawn as the trial goes, from the same generator). */
  next: () => Interruption;
}

/** mulberry32: a small seeded generator whose low bits are as good as its high ones. Integers from min to max. */
function generator(seed: number) {
  let state = seed >>> 0;
  return (min: number, max: number) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    const unit = ((z ^ (z >>> 14)) >>> 0) / 4294967296;
    return min + Math.floor(unit * (max - min + 1));
  };
}

function trial(seed: number): Trial {
  const random = generator(seed);
  const choose = <T>(items: readonly T[]): T => items[random(0, items.length - 1)] as T;
  const sinks = choose(SINK_SETS);
  const planIndex = random(0, PLANS.length - 1);
  const plan = PLANS[planIndex] as (typeof PLANS)[number];
  const concurrency = random(1, 4);
  const min = random(2, 15);
  const latencyMs = { min, max: min + random(5, 45) };
  const simSeed = choose(SIM_SEEDS);
  const pages = plan.queries.length * plan.countries.length * plan.maxPages;
  // How often each point is reached per page: before the transaction once per file sink, after the commit once
  // per sink outside the state store (between-sinks: all of them come after the SQLite sink in its file).
  const perPage = {
    'page-transaction': 1,
    'after-commit': 1,
    'file-before-checkpoint': sinks.filter((kind) => kind === 'csv' || kind === 'csv2' || kind === 'jsonl').length,
    'between-sinks': sinks.filter((kind) => kind === 'sqlite2').length,
  };
  const points = POINTS.filter((point) => perPage[point] > 0);
  const expectedMs = Math.ceil(pages / concurrency) * ((latencyMs.min + latencyMs.max) / 2) + pages * 4;
  const next = (): Interruption => {
    const dice = random(1, 100);
    if (dice <= 45) {
      const point = choose(points);
      return { kind: 'crash', point, n: random(1, Math.max(2, Math.ceil((pages * perPage[point]) / 2))) };
    }
    // Between the start and the first page (some 500 to 900 ms: loading, opening, cutting back, replaying).
    if (dice <= 53) return { kind: 'SIGKILL', afterMs: random(150, 900), early: true };
    // Within about how long an uninterrupted run goes on after its first page, so that most signals land while pages
    // are committed and some after the end (a resumed run has fewer pages left, so that it ends at last).
    return { kind: dice <= 85 ? 'SIGKILL' : 'SIGINT', afterMs: random(5, Math.round(1.3 * expectedMs)) };
  };
  return { seed, sinks, concurrency, latencyMs, planIndex, plan, simSeed, next };
}

const describeTrial = (t: Trial) =>
  `seed ${t.seed}: sinks ${t.sinks.join('+')}, concurrency ${t.concurrency}, latency ${t.latencyMs.min}–${t.latencyMs.max} ms, ` +
  `plan ${t.planIndex} (${t.plan.queries.length}q × ${t.plan.countries.length}c × ${t.plan.maxPages}p), sim seed ${t.simSeed}`;

const describeInterruption = (i: Interruption | undefined) =>
  i === undefined
    ? 'none'
    : i.kind === 'crash'
      ? `crash at ${i.point}:${i.n}`
      : `${i.kind} ${i.afterMs} ms after ${i.early ? 'the start' : 'the first page'}`;

/** What an uninterrupted run of a plan against a simulator seed ends with; computed once per plan and seed. */
interface Baseline {
  sqlite: string[];
  csv: string[];
  jsonl: string[];
  debited: number;
  /** Answered requests in the spend ledger: one per committed page. */
  ledger: number;
}
const baselines = new Map<string, Promise<Baseline>>();

function baseline(t: Trial): Promise<Baseline> {
  const key = JSON.stringify([t.plan, t.simSeed]);
  let cached = baselines.get(key);
  if (!cached) {
    cached = (async () => {
      await using sim = await simulator({ seed: t.simSeed, latencyMs: { min: 0, max: 4 } });
      using dir = workdir();
      const result = await runChild({ ...t.plan, concurrency: 4, baseUrl: sim.url, dir: dir.dir, sinks: ['sqlite', 'csv', 'jsonl'] }).done;
      if (result.code !== 0 || result.summary?.status !== 'completed') throw new Error(`the baseline run failed (${result.code}): ${result.stderr}`);
      return {
        sqlite: stableSqlite(dir.path('out.sqlite')),
        csv: stableCsv(dir.path('out.csv')),
        jsonl: stableJsonl(dir.path('out.jsonl')),
        debited: sim.stats().credits.main?.debited ?? 0,
        ledger: ledger2xx(dir.path('out.sqlite')),
      };
    })();
    baselines.set(key, cached);
  }
  return cached;
}

/** One invocation of the child, interrupted as told (or not at all). */
async function invoke(spec: Record<string, unknown>, interruption: Interruption | undefined): Promise<ChildResult> {
  if (interruption?.kind === 'crash') return runChild(spec, { WEBDATA_CRASH_AT: `${interruption.point}:${interruption.n}` }).done;
  const invocation = runChild(spec);
  if (interruption === undefined) return invocation.done;
  if (!interruption.early) await invocation.pagesCommitted(1);
  const { child } = invocation;
  let timer: NodeJS.Timeout | undefined;
  if (child.exitCode === null && child.signalCode === null) timer = setTimeout(() => child.kill(interruption.kind), interruption.afterMs);
  const result = await invocation.done;
  clearTimeout(timer);
  return result;
}

function integrity(path: string) {
  // A process killed before it created its database left nothing to check.
  if (existsSync(path)) expect(sqliteRows(path, 'PRAGMA integrity_check')).toEqual([{ integrity_check: 'ok' }]);
}

const ledger2xx = (path: string) => Number(sqliteRows(path, "SELECT COUNT(*) AS n FROM spend WHERE status LIKE '2__'")[0]?.n);

/** Statuses of the runs in the state store (none yet when a process was killed before it created the table). */
function runStatuses(path: string) {
  if (!existsSync(path) || sqliteRows(path, "SELECT name FROM sqlite_master WHERE name = 'runs'").length === 0) return [];
  return sqliteRows(path, 'SELECT status FROM runs').map((row) => row.status);
}

describe('crash-resume fuzzing: interrupted at random, again and again, a run ends exactly as an uninterrupted one', () => {
  for (const seed of SEEDS) {
    const t = trial(seed);
    it(describeTrial(t), { timeout: 240_000 }, async () => {
      const log: string[] = [];
      try {
        const want = await baseline(t);
        await using sim = await simulator({ seed: t.simSeed, latencyMs: t.latencyMs });
        using dir = workdir();
        const database = dir.path('out.sqlite');
        const spec = { ...t.plan, concurrency: t.concurrency, baseUrl: sim.url, dir: dir.dir, sinks: t.sinks };

        let interruptions = 0;
        let finished = false;
        for (let invocation = 0; invocation <= MAX_INTERRUPTED && !finished; invocation++) {
          const interruption = invocation < MAX_INTERRUPTED ? t.next() : undefined;
          const started = Date.now();
          const result = await invoke(spec, interruption);
          const outcome = result.signal ?? `exit ${result.code}, ${result.summary?.status ?? 'no summary'}`;
          log.push(`#${invocation + 1} ${describeInterruption(interruption)} → ${outcome} (${result.pages} pages, ${result.replayed ?? '?'} replayed, ${Date.now() - started} ms)`);
          if (result.code === 0 && result.summary?.status === 'completed') {
            finished = true;
            continue;
          }
          // Anything but a kill or a graceful stop is a failure of the run itself.
          const stopped = result.signal === 'SIGKILL' || result.signal === 'SIGINT' || (result.code === 0 && result.summary?.status === 'interrupted');
          expect(stopped, `invocation ${invocation + 1} failed:\n${result.stderr.split('\n').filter((l) => !l.startsWith('{')).join('\n')}`).toBe(true);
          expect(interruption, `invocation ${invocation + 1} was stopped but not interrupted`).toBeDefined();
          interruptions += 1;
          for (const kind of t.sinks) if (kind === 'sqlite' || kind === 'sqlite2') integrity(dir.path(FILES[kind]));
          // A signal that came after the run was recorded as completed (while the process closed its files) leaves a
          // finished run: the next invocation would rightly start a new one.
          if (runStatuses(database).includes('completed')) {
            log.push('  (the run had completed before the interruption took effect)');
            finished = true;
          }
        }
        expect(finished, 'the last, undisturbed invocation did not complete').toBe(true);

        integrity(database);
        // One run, resumed after every interruption, completed.
        expect(runStatuses(database)).toEqual(['completed']);
        const runIds = sqliteRows(database, 'SELECT DISTINCT run_id FROM results').map((row) => row.run_id);
        expect(runIds).toHaveLength(1);
        // Every row exactly once, in every sink: what an uninterrupted run of the same plan holds.
        for (const kind of t.sinks) {
          const file = FILES[kind];
          if (kind === 'sqlite' || kind === 'sqlite2') {
            integrity(dir.path(file));
            expect(stableSqlite(dir.path(file)), file).toEqual(want.sqlite);
            expect(sqliteRows(dir.path(file), 'SELECT DISTINCT run_id FROM results').map((row) => row.run_id)).toEqual(runIds);
            continue;
          }
          const text = readFileSync(dir.path(file), 'utf8');
          if (kind === 'jsonl') {
            expect(text.endsWith('\n')).toBe(true);
            expect(stableJsonl(dir.path(file))).toEqual(want.jsonl);
            expect(new Set(text.split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { run_id: string }).run_id))).toEqual(new Set(runIds));
          } else {
            expect(stableCsv(dir.path(file))).toEqual(want.csv);
            expect(new Set(csvRows(dir.path(file)).map((row) => row.run_id))).toEqual(new Set(runIds));
            // The header (and BOM) is written once.
            expect(text.match(/run_id,query/g)).toHaveLength(1);
            expect(text.match(/\uFEFF/g)?.length ?? 0).toBeLessThanOrEqual(1);
          }
        }
        // Once every sink holds every page, the journal is empty.
        expect(sqliteRows(database, 'SELECT COUNT(*) AS n FROM pages')).toEqual([{ n: 0 }]);
        // No page paid twice beyond the requests in flight at each interruption.
        const debited = sim.stats().credits.main?.debited ?? 0;
        // A kill loses the pages paid for and not yet committed: the run holds at most `concurrency` of them (a permit
        // per page from before its request until its commit), wherever they are between the network and the commit.
        expect(debited, `debited ${debited}, uninterrupted ${want.debited}, ${interruptions} interruptions × concurrency ${t.concurrency}`).toBeLessThanOrEqual(
          want.debited + interruptions * t.concurrency,
        );
        // Every committed page's request is in the ledger (it commits with the page, or before it); nothing is
        // recorded that the server did not charge.
        const ledger = ledger2xx(database);
        expect(ledger, `${ledger} answered requests in the ledger`).toBeGreaterThanOrEqual(want.ledger);
        expect(ledger, `${ledger} answered requests in the ledger`).toBeLessThanOrEqual(debited);
        log.push(`debited ${debited} (uninterrupted ${want.debited}), ${interruptions} interruptions, ledger ${ledger}`);
        if (VERBOSE) console.log(`${describeTrial(t)}\n  ${log.join('\n  ')}`);
      } catch (error) {
        if (error instanceof Error) {
          error.message =
            `fuzz trial ${describeTrial(t)}\nreplay: WEBDATA_FUZZ_SEED=${seed} npx vitest run test/run/fuzz.test.ts\n` +
            `invocations:\n  ${log.join('\n  ')}\n${error.message}`;
        }
        throw error;
      }
    });
  }
});
