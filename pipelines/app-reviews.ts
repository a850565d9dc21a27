// App-store reviews: every review of a few apps, on both stores — an endpoint other than search, paged by a
// cursor the server returns (`next_cursor`), into SQLite and JSON Lines.
//
//   node pipelines/app-reviews.ts --simulator
//   webdata-etl run pipelines/app-reviews.ts
import { dedupe, definePipeline, endpointPages, normalize, runFromCommandLine, toCsv, toSqlite } from 'webdata-etl';

const apps = ['com.example.notes', 'com.example.weather'];

const pipeline = definePipeline({
  name: 'app-reviews',
  source: endpointPages({
    path: '/appstore/reviews',
    params: apps.flatMap((app_id) => [
      { app_id, store: 'ios' },
      { app_id, store: 'android' },
    ]),
    itemsAt: 'data',
    cursor: { from: 'next_cursor', param: 'cursor' },
    maxPages: 10,
  }),
  // Reviews have no URL: normalize() keys them by their `id`, and keeps every field of the review in `raw`.
  stages: [normalize(), dedupe()],
  sinks: [toSqlite({ path: 'data/reviews.sqlite', table: 'reviews' }), toCsv({ path: 'data/reviews.csv' })],
  rate: { requestsPerSecond: 5, concurrency: 2 },
  credits: { weights: { '/appstore/reviews': 1 } },
  budget: { maxCredits: 100 },
});

export default pipeline;

if (import.meta.main) await runFromCommandLine(pipeline);
