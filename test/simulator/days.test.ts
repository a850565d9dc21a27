// The simulator's days (issue 42, item 5): series that keep their ranking from day to day unless they move, each at
// a rate of its own; domains that drift, enter and leave; the ground truth a benchmark measures runs against, checked
// against the answers served over real sockets. Virtual: days are set, never waited for.
import { describe, expect, it } from 'vitest';
import type { Item } from '../../src/index.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { clientFor, simulator } from '../helpers.ts';

const urlOf = (item: Item | undefined) => String(item?.url ?? item?.link ?? '');
const series = (i: number) => ({ q: `keyword ${i}`, country: 'us', lang: 'en' });

/** The first `pages` pages of 10 of a series as served now, over a real socket. */
async function served(sim: Simulator, s: { q: string; country: string; lang: string }, pages: number): Promise<Item[]> {
  await using client = clientFor(sim);
  const items: Item[] = [];
  for (let page = 1; page <= pages; page++) items.push(...(await client.search({ ...s, page, count: 10 })).data);
  return items;
}

describe('a simulated day', () => {
  it('answers the same query the same on the same day: after other days, and from another simulator of the seed', async () => {
    await using sim = await simulator({ seed: 5, day: 3 });
    const s = series(1);
    const first = await served(sim, s, 3);
    sim.setDay(9);
    sim.advanceDay();
    expect(sim.day).toBe(10);
    sim.setDay(3);
    expect(await served(sim, s, 3)).toEqual(first);
    await using again = await simulator({ seed: 5, day: 3 });
    expect(await served(again, s, 3)).toEqual(first);
    // Items as large as a real engine's (a serp item about 500-600 bytes of JSON, Brave's about 1,900): 400 or more.
    const bytes = first.reduce((sum, item) => sum + Buffer.byteLength(JSON.stringify(item)), 0) / first.length;
    expect(bytes).toBeGreaterThan(400);
    // Wall-clock drift plays no part on a day.
    await using drifting = await simulator({ seed: 5, day: 3, driftEveryMs: 1, epoch: () => 123_456_789 });
    expect(await served(drifting, s, 3)).toEqual(first);
  });

  it('day 0 is the ranking of a simulator without days; advanceDay starts there; no day, no ground truth', async () => {
    await using plain = await simulator({ seed: 8 });
    expect(plain.day).toBeUndefined();
    expect(() => plain.ranking(series(2))).toThrow(/no day/);
    // Page 1 has no slide: the same results with or without days on day 0 (a day's items are larger, their URLs the same).
    const before = await served(plain, series(2), 1);
    expect(plain.advanceDay()).toBe(0);
    expect((await served(plain, series(2), 1)).map(urlOf)).toEqual(before.map(urlOf));
    expect(() => plain.setDay(3651)).toThrow(/0 to 3650/);
    expect(() => plain.setDay(1.5)).toThrow(/0 to 3650/);
  });

  it('the ground truth is what is served: every page of five, on several days, and each domain best rank', async () => {
    await using sim = await simulator({ seed: 3, day: 0 });
    for (const day of [0, 7, 21]) {
      sim.setDay(day);
      for (const i of [0, 1, 2, 3]) {
        const s = series(i);
        const items = await served(sim, s, 5);
        const truth = sim.ranking(s);
        expect(items.map(urlOf)).toEqual(truth.slice(0, 50).map((result) => result.url));
        for (const result of truth.slice(0, 50)) {
          const bare = result.domain.replace(/^www\./, '');
          const first = truth.find((other) => other.domain.replace(/^www\./, '') === bare)?.rank;
          expect(sim.rankOf(s, bare, day)).toBe(first);
          expect(sim.rankOf(s, `www.${bare}`.toUpperCase())).toBe(first);
        }
        expect(sim.rankOf(s, 'never-ranked.example')).toBeNull();
      }
    }
  });
});

describe('a month of days', () => {
  const SERIES = 300;
  const DAYS = 30;

  it('most series move rarely, a few nearly daily, each at its own rate', async () => {
    await using sim = await simulator({ seed: 7, day: 0 });
    const moves = Array.from({ length: SERIES }, (_, i) => {
      let count = 0;
      for (let day = 1; day <= DAYS; day++) if (sim.movedOn(series(i), day)) count++;
      return { count, rate: sim.volatility(series(i)) };
    });
    const counts = moves.map((m) => m.count).sort((a, b) => a - b);
    // The median series moves at most twice a month; three in five at most three times; still one in twenty moves on
    // at least half the days.
    expect(counts[SERIES / 2]).toBeLessThanOrEqual(2);
    expect(counts.filter((c) => c <= 3).length).toBeGreaterThanOrEqual((SERIES * 3) / 5);
    expect(counts.filter((c) => c >= DAYS / 2).length).toBeGreaterThanOrEqual(SERIES / 20);
    expect(counts.filter((c) => c >= DAYS / 2).length).toBeLessThanOrEqual(SERIES / 4);
    // Each series' own rate shows: the volatile ones (rate above a half) move far more than the quiet (below 5 %).
    const mean = (list: { count: number }[]) => list.reduce((sum, m) => sum + m.count, 0) / list.length;
    const volatile = moves.filter((m) => m.rate > 0.5);
    const quiet = moves.filter((m) => m.rate < 0.05);
    expect(volatile.length).toBeGreaterThan(0);
    expect(mean(volatile)).toBeGreaterThan(15);
    expect(mean(quiet)).toBeLessThan(2);
    // A day without a move is the day before's ranking, exactly.
    for (let i = 0; i < 20; i++) {
      for (let day = 1; day <= DAYS; day++) {
        if (!sim.movedOn(series(i), day)) expect(sim.ranking(series(i), day)).toEqual(sim.ranking(series(i), day - 1));
      }
    }
  });

  it('tracked domains drift by three ranks or more, enter and leave the first 50, as the ground truth and the answers say', async () => {
    await using sim = await simulator({ seed: 7, day: 0 });
    const depth = 50;
    const within = (rank: number | null) => rank !== null && rank <= depth;
    let drifts = 0;
    let entered: { s: ReturnType<typeof series>; domain: string; day: number } | undefined;
    let left: { s: ReturnType<typeof series>; domain: string; day: number } | undefined;
    for (let i = 0; i < SERIES; i++) {
      const s = series(i);
      const domains = new Set(Array.from({ length: DAYS + 1 }, (_, day) => sim.ranking(s, day).slice(0, depth).map((r) => r.domain)).flat());
      for (const domain of domains) {
        for (let day = 1; day <= DAYS; day++) {
          const [before, after] = [sim.rankOf(s, domain, day - 1), sim.rankOf(s, domain, day)];
          if (within(before) && within(after) && Math.abs((after as number) - (before as number)) >= 3) drifts++;
          if (!within(before) && within(after)) entered ??= { s, domain, day };
          if (within(before) && !within(after)) left ??= { s, domain, day };
        }
      }
    }
    expect(drifts).toBeGreaterThan(50);
    expect(entered).toBeDefined();
    expect(left).toBeDefined();
    // Over real sockets: the domain is absent from the first five pages the day before it enters, present that day;
    // the one that leaves, the other way round.
    const hosts = async (day: number, s: ReturnType<typeof series>) => {
      sim.setDay(day);
      return new Set((await served(sim, s, 5)).map((item) => new URL(urlOf(item)).hostname.toLowerCase().replace(/^www\./, '')));
    };
    const bare = (domain: string) => domain.replace(/^www\./, '');
    if (entered) {
      expect((await hosts(entered.day - 1, entered.s)).has(bare(entered.domain))).toBe(false);
      expect((await hosts(entered.day, entered.s)).has(bare(entered.domain))).toBe(true);
    }
    if (left) {
      expect((await hosts(left.day - 1, left.s)).has(bare(left.domain))).toBe(true);
      expect((await hosts(left.day, left.s)).has(bare(left.domain))).toBe(false);
    }
  });
});
