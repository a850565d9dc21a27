// `npm start`: the main job on a fresh machine with no account. It starts the built-in simulator, runs a rank-tracking
// pipeline against it (queries × countries × pages → normalize → dedupe → SQLite and CSV), and prints the summary.
// The simulator's URL is passed explicitly: webdata-etl never falls back to the simulator on its own.
import { dedupe, definePipeline, normalize, run, searchPages, startSimulator, toCsv, toSqlite } from '../src/index.ts';

const key = `demo_${crypto.randomUUID()}`;
await using sim = await startSimulator({
  seed: 1,
  latencyMs: { min: 20, max: 80 },
  // A plan like a real one: 10 requests per second, a small burst, a credit balance.
  keys: [{ key, name: 'demo', ratePerSecond: 10, burst: 2, credits: 1000 }],
});
process.stderr.write(`Simulator at ${sim.url}\n`);

const pipeline = definePipeline({
  name: 'rank-tracking',
  source: searchPages({
    queries: ['espresso machine', 'trail running shoes', 'noise cancelling headphones'],
    countries: ['us', 'gb', 'de'],
    langs: ['en'],
    maxPages: 3,
    count: 10,
  }),
  stages: [normalize(), dedupe({ key: 'url' })],
  sinks: [toSqlite({ path: 'data/rank.sqlite', table: 'results' }), toCsv({ path: 'data/rank.csv' })],
  rate: { requestsPerSecond: 10, concurrency: 4 },
  budget: { maxCredits: 200 },
});

const summary = await run(pipeline, {
  baseUrl: sim.url,
  apiKey: key,
  onEvent(event) {
    if (event.type === 'series') process.stderr.write(`  ${event.series}: ${event.reason} after ${event.pages} page(s)\n`);
  },
});
process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
process.stderr.write(`Wrote data/rank.sqlite (table results) and data/rank.csv: ${summary.items.written} rows, ${summary.credits.spent} credits.\n`);
