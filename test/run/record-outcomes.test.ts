// The run's close hands the sinks every series' outcome (run/record-outcomes.ts), reading where they stand either
// whole (a run that reached few of its series) or a slice of the plan at a time: both hand over the same.
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import type { Series } from '../../src/pipeline/page.ts';
import { recordOutcomes } from '../../src/run/record-outcomes.ts';
import type { SeriesOutcome } from '../../src/sinks/series-outcomes.ts';
import type { Sink } from '../../src/sinks/sink.ts';
import type { SourcePlan } from '../../src/sources/source.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';

const SERIES: Series[] = Array.from({ length: 1_200 }, (_, i) => ({ id: `search|q${i}|us|`, endpoint: 'search', query: `q${i}`, country: 'us', lang: '' }));
const plan: SourcePlan = { endpoint: 'search', seriesCount: SERIES.length, maxPages: 1, fingerprint: {}, series: () => SERIES };

it('hands over every series of the plan, the reached ones as they ended, the same whether it reads their statuses whole or by slices', async () => {
  const db = new Database(':memory:');
  const store = sqliteStateStore(db, { commitThread: false });
  try {
    await store.startRun({ runId: 'r', pipeline: 'p', startedAt: '2026-01-01T00:00:00.000Z', fingerprint: 'f', plan: {}, budget: null });
    // Reached: every 100th series, ended one way or another, in a plan of 1,200 (three slices).
    const reasons = ['short', 'failed', 'budget', 'max_pages'];
    for (const [i, series] of SERIES.entries()) {
      if (i % 100 !== 7) continue;
      await store.endSeries('r', { seriesId: series.id, endpoint: series.endpoint, query: series.query, country: series.country, lang: series.lang }, {
        status: 'ended', reason: reasons[(i / 100) % 4 | 0] ?? 'short', nextPage: null, error: null, errorKind: null,
      });
    }
    const recorded = async (held?: number) => {
      const written: SeriesOutcome[][] = [];
      const sink = { kind: 'test', outcomes: (_runId: string, outcomes: readonly SeriesOutcome[]) => void written.push([...outcomes]) } as unknown as Sink<unknown>;
      await recordOutcomes({ store, plan, runId: 'r', sinks: [sink], runStop: 'budget', ...(held === undefined ? {} : { held }) });
      return written;
    };
    const whole = await recorded();
    expect(whole.map((slice) => slice.length)).toEqual([500, 500, 200]);
    expect(whole.flat().map((o) => o.query)).toEqual(SERIES.map((s) => s.query));
    expect(whole.flat()[0]).toEqual({ query: 'q0', country: 'us', lang: '', complete: false, reason: 'not_reached' });
    expect(whole.flat().filter((o) => o.reason !== 'not_reached').map((o) => o.query)).toEqual(SERIES.filter((_, i) => i % 100 === 7).map((s) => s.query));
    expect(whole.flat().filter((o) => o.complete).map((o) => o.reason)).toEqual(['short', 'max_pages', 'short', 'max_pages', 'short', 'max_pages']);
    // Read a slice of the plan at a time (more reached than it holds), or a few at a time: the same, written alike.
    expect(await recorded(0)).toEqual(whole);
    expect(await recorded(5)).toEqual(whole);
    expect(await recorded(12)).toEqual(whole);
  } finally {
    await store.close();
    db.close();
  }
});
