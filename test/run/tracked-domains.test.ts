// Tracked domains and depth until found (issue 42, items 1 and 2): each series keeps its tracked domains' best ranks
// and how deep it was searched, and with depth until found ends on the page where the last of them appeared plus a
// margin. Measured against the simulator's ground truth on a day, over real sockets: the pages each series cost are
// the requests the simulator counted for its query.
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, searchPages, toSqlite } from '../../src/index.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

const DAY = 4;
const bare = (domain: string) => domain.replace(/^www\./, '');

/** Requests the simulator answered for each query. */
function pagesByQuery(sim: Simulator): Map<string, number> {
  const counts = new Map<string, number>();
  for (const entry of sim.log()) {
    const q = new URLSearchParams(entry.query).get('q');
    if (q !== null && entry.status === 200) counts.set(q, (counts.get(q) ?? 0) + 1);
  }
  return counts;
}

/** A domain of the series whose best rank on the day is on `page` (pages of 10), as the ground truth has it. */
function domainOnPage(sim: Simulator, q: string, page: number, not: readonly string[] = []): { domain: string; rank: number } {
  const ranking = sim.ranking({ q, country: 'us', lang: 'en' });
  for (const result of ranking) {
    const domain = bare(result.domain);
    const best = sim.rankOf({ q, country: 'us', lang: 'en' }, domain);
    if (best !== null && best > (page - 1) * 10 && best <= page * 10 && !not.includes(domain)) return { domain: result.domain, rank: best };
  }
  throw new Error(`no domain of "${q}" is first on page ${page}`);
}

/** The same host as the ranking has it, written the other way: with `www.` where it has none and none where it has, upper case. */
const otherSpelling = (domain: string) => (domain.startsWith('www.') ? bare(domain) : `www.${domain}`).toUpperCase();

function pipeline(path: string, queries: string[], extra: Record<string, unknown>) {
  return definePipeline({
    name: 'tracked',
    source: searchPages({ queries, countries: ['us'], langs: ['en'], maxPages: 5, count: 10 }),
    stages: [normalize()],
    sinks: [toSqlite({ path })],
    ...extra,
  });
}

describe('depth until found', () => {
  for (const margin of [0, 1]) {
    it(`ends a series on the page its domain was found on, plus a margin of ${margin}, and keeps its best rank`, async () => {
      await using sim = await simulator({ seed: 11, day: DAY });
      using dir = workdir();
      const { domain, rank } = domainOnPage(sim, 'espresso', 2);
      const summary = await runOn(sim, pipeline(dir.path('out.sqlite'), ['espresso'], { track: { domains: [otherSpelling(domain)] }, refresh: { depth: 'until-found', margin } }));
      expect(summary.status).toBe('completed');
      expect(pagesByQuery(sim).get('espresso')).toBe(2 + margin);
      expect(summary.series.byReason).toEqual({ found: 1 });
      expect(sqliteRows(dir.path('out.sqlite'), 'SELECT query, country, lang, domain, rank, searched FROM results_tracked')).toEqual([
        { query: 'espresso', country: 'us', lang: 'en', domain: bare(domain.toLowerCase()), rank, searched: (2 + margin) * 10 },
      ]);
    });
  }
});
