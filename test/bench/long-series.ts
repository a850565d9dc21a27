// (o) Long series through normalize → dedupe → SQLite: the same items as many short or few long series, to show what a
// series' length costs per item (its stage state grows with it). Alone: `node test/bench/long-series.ts [items] [pages,…]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dedupe, definePipeline, normalize, type Page, run, type Source, toSqlite } from '../../src/index.ts';
import type { Series } from '../../src/pipeline/page.ts';
import { perSecond, PER_PAGE, timed } from './throughput.ts';

/** A source of `series` series of `pages` full pages each, items made up (no network: this measures the local path). */
function madeUp(series: number, pages: number): Source {
  const seriesOf = (i: number): Series => ({ id: `search|long ${i}||`, endpoint: '/searchengine/search', query: `long ${i}`, country: '', lang: '' });
  return {
    plan: () => ({
      endpoint: '/searchengine/search',
      seriesCount: series,
      maxPages: pages,
      fingerprint: { series, pages },
      *series() {
        for (let i = 0; i < series; i++) yield seriesOf(i);
      },
    }),
    async *pages(ctx) {
      for (let i = 0; i < series; i++) {
        const s = seriesOf(i);
        for (let number = 1; number <= pages; number++) {
          const items = Array.from({ length: PER_PAGE }, (_, k) => ({ title: `Result ${number}.${k} of ${s.query}`, url: `https://example.com/${i}/${number}/${k}?ref=x`, snippet: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit.' }));
          const last = number === pages;
          const page: Page = {
            key: `${s.id}#${number}`,
            series: s,
            number,
            items,
            meta: { status: 200, requestId: undefined, fetchedAt: new Date().toISOString(), latencyMs: 0, bytes: 0, served: items.length, ...(last ? { end: 'max_pages' as const } : {}) },
          };
          yield page;
        }
        ctx.seriesEnded(s, { reason: 'max_pages', pages });
      }
    },
  };
}

/** Items per second at each series length (pages of 100 per series), the same number of items each time. */
export async function scenarioLongSeries(items: number, lengths: readonly number[]) {
  const figures: Record<string, { series: number; pages: number; ms: number; itemsPerSecond: number }> = {};
  for (const pages of lengths) {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-long-'));
    try {
      const series = Math.max(1, Math.round(items / (pages * PER_PAGE)));
      const path = join(dir, 'out.sqlite');
      const { ms } = await timed(() =>
        // No request is sent (the source makes its pages up): the client is never used.
        run(definePipeline({ name: 'long-series', source: madeUp(series, pages), stages: [normalize(), dedupe()], sinks: [toSqlite({ path })] }), { baseUrl: 'http://127.0.0.1:9/api/v1', apiKey: 'unused', env: {} }),
      );
      figures[`${pages}PagesPerSeries`] = { series, pages, ms, itemsPerSecond: perSecond(series * pages * PER_PAGE, ms) };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const rates = Object.values(figures).map((f) => f.itemsPerSecond);
  return { items, figures, longestOverShortest: Math.round(((rates.at(-1) ?? 0) / (rates[0] ?? 1)) * 1000) / 1000 };
}

if (import.meta.main) {
  const items = Number(process.argv[2] ?? 100_000);
  const lengths = (process.argv[3] ?? '5,100,500').split(',').map(Number);
  process.stdout.write(`${JSON.stringify(await scenarioLongSeries(items, lengths), null, 2)}\n`);
}
