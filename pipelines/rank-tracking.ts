// Rank tracking: where do pages rank for a few queries, country by country, page by page?
//
//   node pipelines/rank-tracking.ts --simulator      # against the built-in simulator (no account)
//   WEBDATA_BASE_URL=https://…/api/v1 WEBDATA_API_KEY=… node pipelines/rank-tracking.ts
//   webdata-etl run pipelines/rank-tracking.ts       # the same, through the command line
//
// It imports from 'webdata-etl' exactly as your own pipeline file would.
import { dedupe, definePipeline, type NormalizedItem, normalize, runFromCommandLine, searchPages, type Stage, toCsv, toSqlite } from 'webdata-etl';

// A stage of our own, as plain as they come: keep every page, drop nothing, and leave results from
// link aggregators out of the outputs.
const aggregators = new Set(['news.ycombinator.com', 'www.reddit.com']);
const withoutAggregators: Stage<NormalizedItem, NormalizedItem> = async function* (pages) {
  for await (const page of pages) yield { ...page, items: page.items.filter((item) => !aggregators.has(item.domain ?? '')) };
};

const pipeline = definePipeline({
  name: 'rank-tracking',
  source: searchPages({
    queries: ['espresso machine', 'trail running shoes', 'noise cancelling headphones'],
    countries: ['us', 'gb', 'de'],
    langs: ['en'],
    maxPages: 3,
    count: 10,
  }),
  stages: [normalize(), dedupe({ key: 'url' }), withoutAggregators],
  sinks: [toSqlite({ path: 'data/rank.sqlite', table: 'results' }), toCsv({ path: 'data/rank.csv' })],
  rate: { requestsPerSecond: 10, concurrency: 4 },
  budget: { maxCredits: 200 },
});

export default pipeline;

if (import.meta.main) await runFromCommandLine(pipeline);
