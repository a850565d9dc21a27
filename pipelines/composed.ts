// Composing in code (docs/pipelines.md#composing-in-code): a stage and a sink of your own, typed once where they are
// defined; the pipeline's item type flows from the source through each stage to the sinks, and a stage or sink that
// does not fit is a compile error (npm run typecheck). Run it as any pipeline file:
//
//   node pipelines/composed.ts --simulator
import { definePipeline, defineSink, mapItems, normalize, type NormalizedItem, runFromCommandLine, searchPages, toJsonl } from 'webdata-etl';

/** What this pipeline keeps of a result: a stage of our own makes it from the normalized item. */
interface Ranked {
  query: string;
  country: string;
  rank: number;
  domain: string | null;
}

const ranked = mapItems((item: NormalizedItem): Ranked => ({ query: item.query, country: item.country, rank: item.rank, domain: item.domain }));

/** A sink of our own: the best rank each domain reached, per query, printed when the run ends. */
const best = new Map<string, number>();
const bestRanks = defineSink<Ranked>({
  kind: 'best-ranks',
  target: 'the best rank of each domain',
  write(page) {
    for (const item of page.items) {
      const key = `${item.query} · ${item.country} · ${item.domain ?? '(none)'}`;
      best.set(key, Math.min(best.get(key) ?? Number.POSITIVE_INFINITY, item.rank));
    }
  },
  close() {
    for (const [key, rank] of [...best].sort((a, b) => a[1] - b[1]).slice(0, 10)) console.error(`${String(rank).padStart(3)}  ${key}`);
  },
});

const pipeline = definePipeline({
  name: 'composed',
  source: searchPages({ queries: ['espresso machine', 'pour over kettle'], countries: ['us', 'gb'], maxPages: 2, count: 10 }),
  // normalize() turns what the API sent into NormalizedItem, which `ranked` takes; `bestRanks` takes what it yields.
  // Swapped, [ranked, normalize()] does not compile: ranked takes NormalizedItem and would be given the raw items.
  stages: [normalize(), ranked],
  sinks: [bestRanks, toJsonl({ path: 'data/composed.jsonl' })],
});

export default pipeline;

if (import.meta.main) await runFromCommandLine(pipeline);
