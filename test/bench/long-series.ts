// (o) Long series through normalize → dedupe → SQLite: the same items as many short or few long series, to show what a
// series' length costs per item (its stage state grows with it). Alone: `node test/bench/long-series.ts [items] [pages,…]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dedupe, definePipeline, normalize, run, toSqlite } from '../../src/index.ts';
import { madeUpSource, offline } from '../fixtures/made-up-source.ts';
import { perSecond, PER_PAGE, timed } from './throughput.ts';

/** Items per second at each series length (pages of 100 per series), the same number of items each time. */
export async function scenarioLongSeries(items: number, lengths: readonly number[]) {
  const figures: Record<string, { series: number; pages: number; ms: number; itemsPerSecond: number }> = {};
  for (const pages of lengths) {
    const dir = mkdtempSync(join(tmpdir(), 'webdata-long-'));
    try {
      const series = Math.max(1, Math.round(items / (pages * PER_PAGE)));
      const path = join(dir, 'out.sqlite');
      const { ms } = await timed(() =>
        run(definePipeline({ name: 'long-series', source: madeUpSource({ series, pages, perPage: PER_PAGE, url: (i, number, k) => `https://example.com/${i}/${number}/${k}?ref=x` }), stages: [normalize(), dedupe()], sinks: [toSqlite({ path })] }), offline),
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
