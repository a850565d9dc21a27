import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { defineSink, normalize, searchPages, type Stage, toSqlite } from '../../src/index.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { rejection, simulator, until } from '../helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';
import { runOn, workdir } from '../pipeline-helpers.ts';

/** What the state store recorded for a pipeline's runs: credits by whether their page was committed. */
function ledger(path: string): { credits: number; uncommitted: number; requests: number } {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT COALESCE(SUM(credits), 0) AS credits, COALESCE(SUM(CASE WHEN uncommitted = 1 THEN credits ELSE 0 END), 0) AS uncommitted, COUNT(*) AS requests FROM spend`).get() as {
      credits: number;
      uncommitted: number;
      requests: number;
    };
  } finally {
    db.close();
  }
}

/** A stage of the user's that throws on every page of one query. */
function throwsOn(query: string): Stage {
  return async function* (pages) {
    for await (const page of pages) {
      if (page.series.query === query) throw new Error('the stage broke');
      yield page;
    }
  };
}

describe('paid but never committed (issue 28, 1)', () => {
  it('a run that fails again and again ends at its budget: every answered 2xx is recorded, committed or not', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const pipeline = {
      name: 'failing-stage',
      source: searchPages({ queries: ['d', 'a'], countries: ['us'], maxPages: 3 }),
      stages: [normalize(), throwsOn('d')],
      sinks: [toSqlite({ path: dir.path('out.sqlite') })],
      budget: { maxCredits: 4 },
      rate: { concurrency: 1 },
    };
    // As a cron job or `Restart=on-failure` would: the same command again and again.
    const outcomes: string[] = [];
    for (let attempt = 0; attempt < 8; attempt += 1) {
      try {
        const summary = await runOn(sim, pipeline);
        outcomes.push(summary.status);
        break;
      } catch (error) {
        outcomes.push((error as Error).message);
      }
    }
    const debited = sim.stats().credits.main?.debited ?? 0;
    // Before: each failing invocation paid again for the page it had answered and not committed (8 of 4 here: one a run).
    expect(debited).toBeLessThanOrEqual(4);
    // The ledger holds every credit the server took: the next invocation's budget starts from the truth.
    expect(ledger(dir.path('out.sqlite')).credits).toBe(debited);
    // The loop ends: once the budget is spent, no page reaches the stage, and the run finishes on its budget.
    expect(outcomes.at(-1)).toBe('budget');
  });

  it('a sink that fails: every answer is recorded (with the state in SQLite, the pages behind it commit on the thread)', async () => {
    await using sim = await simulator({ seed: 6 });
    using dir = workdir();
    const error = await rejection(runFailingSink(sim, dir.path('out.sqlite'), {}));
    expect(error.message).toContain('the sink broke');
    expect(ledger(dir.path('out.sqlite')).credits).toBe(sim.stats().credits.main?.debited);
  });

  it('a page whose transaction fails is recorded as paid and not committed', async () => {
    await using sim = await simulator({ seed: 7 });
    using dir = workdir();
    const path = dir.path('out.sqlite');
    let seen = 0;
    // On its second page, the stage makes the results table refuse every row from then on (as a full disk would refuse
    // the page's transaction): that page's transaction fails.
    const poison: Stage = async function* (input) {
      for await (const page of input) {
        seen += 1;
        if (seen === 2) {
          const db = new Database(path);
          db.pragma('busy_timeout = 10000');
          db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON results BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`);
          db.close();
        }
        yield page;
      }
    };
    const error = await rejection(
      runOn(sim, {
        name: 'failing-transaction',
        source: searchPages({ queries: ['a', 'b', 'c'], countries: ['us'], maxPages: 2 }),
        stages: [normalize(), poison],
        sinks: [toSqlite({ path })],
        rate: { concurrency: 2 },
      }),
    );
    expect(error.message).toContain('refused by a trigger');
    const recorded = ledger(path);
    expect(recorded.credits).toBe(sim.stats().credits.main?.debited);
    expect(recorded.uncommitted).toBeGreaterThan(0);
    // The spend view says it too.
    const db = new Database(path, { readonly: true });
    expect(db.prepare('SELECT SUM(uncommitted_credits) FROM report_spend').pluck().get()).toBe(recorded.uncommitted);
    db.close();
  });
});

describePostgres('paid but never committed, with the state in PostgreSQL (issue 28, 1)', () => {
  it('a sink that fails records the spend of the pages answered behind it, as paid and not committed', async () => {
    await using sim = await simulator({ seed: 6 });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const error = await rejection(runFailingSink(sim, dir.path('out.sqlite'), { stateUrl: db.url }));
      expect(error.message).toContain('the sink broke');
      const [recorded] = (await sql(
        db.url,
        `SELECT SUM(credits)::float8 AS credits, SUM(CASE WHEN uncommitted THEN credits ELSE 0 END)::float8 AS uncommitted FROM webdata.spend`,
      )) as [{ credits: number; uncommitted: number }];
      // Before: the two answers behind the failed page were paid and never recorded.
      expect(recorded.credits).toBe(sim.stats().credits.main?.debited);
      expect(recorded.uncommitted).toBeGreaterThanOrEqual(2);
    } finally {
      await db.drop();
    }
  });
});

/**
 * A run whose sink of the user's fails on its second page once two more pages have been answered behind it (pages
 * that, committing in order, can no longer commit on the run's own thread).
 */
function runFailingSink(sim: Simulator, sqlitePath: string, options: { stateUrl?: string }) {
  let answered = 0;
  let pages = 0;
  const failing = defineSink({
    kind: 'failing',
    async write() {
      pages += 1;
      if (pages !== 2) return;
      await until(() => answered >= 4);
      throw new Error('the sink broke');
    },
  });
  return runOn(
    sim,
    {
      name: 'failing-sink',
      source: searchPages({ queries: ['a', 'b', 'c'], countries: ['us'], maxPages: 2 }),
      stages: [normalize()],
      sinks: options.stateUrl ? [failing] : [toSqlite({ path: sqlitePath }), failing],
      rate: { concurrency: 3 },
    },
    { ...options, onEvent: (event) => void (event.type === 'response' && event.status === 200 && (answered += 1)) },
  );
}
