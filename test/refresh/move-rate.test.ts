// A series' moves and its rate of moving, as the refresh planner reads them from its history (src/refresh/history.ts,
// move-rate.ts; docs/design.md#the-refresh-planner).
import { describe, expect, it } from 'vitest';
import { intervalsOf, rankMoved, runsMoved, runsSkipped, type SeriesRun } from '../../src/refresh/history.ts';
import { estimateRate, moveWithin, pooledPrior } from '../../src/refresh/move-rate.ts';

const at = (rank: number | null, searched = 50) => ({ domain: 'example.com', rank, searched });
const fetched = (rank: number | null, searched = 50): SeriesRun => ({ fetched: true, ranks: [at(rank, searched)] });
const skipped: SeriesRun = { fetched: false };

describe('a move (the issue: 3 ranks or more, or entering or leaving the fetched depth)', () => {
  it('3 ranks up or down is a move, 2 is not', () => {
    expect(rankMoved(at(5), at(8))).toBe(true);
    expect(rankMoved(at(8), at(5))).toBe(true);
    expect(rankMoved(at(5), at(7))).toBe(false);
    expect(rankMoved(at(5), at(5))).toBe(false);
  });

  it('entering or leaving the depth searched is a move; not found twice is not', () => {
    expect(rankMoved(at(null, 50), at(12))).toBe(true);
    expect(rankMoved(at(12), at(null, 50))).toBe(true);
    expect(rankMoved(at(null, 50), at(null, 30))).toBe(false);
  });

  it('a domain found beyond what the other run searched is no move: that run could not have seen it', () => {
    expect(rankMoved(at(45), at(null, 30))).toBe(false);
    expect(rankMoved(at(null, 20), at(25))).toBe(false);
  });

  it('domains are compared with themselves; one seen in a single run is not compared', () => {
    const before = [at(4), { domain: 'other.org', rank: 9, searched: 50 }];
    expect(runsMoved(before, [{ domain: 'other.org', rank: 9, searched: 50 }, at(4)])).toBe(false);
    expect(runsMoved(before, [{ domain: 'other.org', rank: 20, searched: 50 }, at(4)])).toBe(true);
    expect(runsMoved(before, [{ domain: 'new.net', rank: 1, searched: 50 }])).toBe(false);
  });
});

describe("a series' history", () => {
  it('gives the intervals between its fetches, with their gaps in runs', () => {
    const history = [fetched(3), skipped, skipped, fetched(9), fetched(10), skipped, fetched(null)];
    expect(intervalsOf(history)).toEqual([
      { gap: 3, moved: true },
      { gap: 1, moved: false },
      { gap: 2, moved: true },
    ]);
  });

  it('says how many runs have skipped it since its last fetch (null: never fetched)', () => {
    expect(runsSkipped([])).toBeNull();
    expect(runsSkipped([skipped, skipped])).toBeNull();
    expect(runsSkipped([fetched(1)])).toBe(0);
    expect(runsSkipped([fetched(1), skipped, skipped])).toBe(2);
  });
});

describe('the move rate', () => {
  const prior = { mean: 0.1, weight: 2 };

  it('is the prior with nothing observed', () => {
    expect(estimateRate([], prior).rate).toBeCloseTo(0.1, 1);
  });

  it('does not judge a series seen to move once certain, nor one seen still once never to move', () => {
    const once = estimateRate([{ gap: 1, moved: true }], prior);
    expect(once.rate).toBeGreaterThan(0.2);
    expect(once.rate).toBeLessThan(0.8);
    const still = estimateRate([{ gap: 1, moved: false }], prior);
    expect(still.rate).toBeGreaterThan(0.01);
    expect(still.rate).toBeLessThan(0.1);
  });

  it('rises with the moves observed and sharpens with the intervals', () => {
    const few = estimateRate(Array.from({ length: 10 }, (_, i) => ({ gap: 1, moved: i < 2 })), prior);
    const many = estimateRate(Array.from({ length: 10 }, (_, i) => ({ gap: 1, moved: i < 8 })), prior);
    expect(many.rate).toBeGreaterThan(few.rate + 0.4);
    expect(few.rate).toBeGreaterThan(0.1);
    expect(estimateRate(Array.from({ length: 40 }, (_, i) => ({ gap: 1, moved: i % 5 === 0 })), prior).spread).toBeLessThan(few.spread);
  });

  it('reads a move seen across a long gap as a lower rate than one seen across a single run (1 − (1 − p)^g)', () => {
    const short = estimateRate([{ gap: 1, moved: true }, { gap: 1, moved: true }], prior);
    const long = estimateRate([{ gap: 7, moved: true }, { gap: 7, moved: true }], prior);
    expect(long.rate).toBeLessThan(short.rate - 0.1);
    expect(moveWithin(long.rate, 7)).toBeGreaterThan(0.4);
  });

  it('is the same to the last bit for the same intervals in any order, so that ties are broken by id, not by rounding', () => {
    const intervals = [
      { gap: 1, moved: true },
      { gap: 3, moved: false },
      { gap: 1, moved: false },
      { gap: 7, moved: true },
      { gap: 2, moved: false },
      { gap: 1, moved: false },
      { gap: 5, moved: true },
    ];
    const first = estimateRate(intervals, prior);
    for (let turn = 1; turn < intervals.length; turn++) {
      const turned = [...intervals.slice(turn), ...intervals.slice(0, turn)];
      expect(estimateRate(turned, prior)).toEqual(first);
      expect(estimateRate([...turned].reverse(), prior)).toEqual(first);
    }
  });

  it('pools every series for the prior, 0.1 when nothing has been fetched twice', () => {
    expect(pooledPrior([[], []])).toEqual({ mean: 0.1, weight: 2 });
    const still = pooledPrior([Array.from({ length: 20 }, () => ({ gap: 1, moved: false })), [{ gap: 1, moved: true }]]);
    expect(still.mean).toBeGreaterThan(0.02);
    expect(still.mean).toBeLessThan(0.15);
  });
});
