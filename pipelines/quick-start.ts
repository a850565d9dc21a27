// `npm start`: starts the built-in simulator and searches a few queries across countries and pages with the
// client, so that a new user sees the API's shape on a fresh machine with no account.
// (The full rank-tracking pipeline, with SQLite and CSV outputs, takes this file's place as the pipeline lands.)
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, RateLimitError, startSimulator } from '../src/index.ts';

const queries = ['espresso machine', 'trail running shoes'];
const countries = ['us', 'gb', 'de'];

await using sim = await startSimulator({
  seed: 1,
  latencyMs: { min: 5, max: 25 },
  keys: [{ key: `demo_${crypto.randomUUID()}`, name: 'demo', ratePerSecond: 10, burst: 2, credits: 1000 }],
});
// The URL is passed explicitly: webdata-etl never falls back to the simulator on its own.
await using client = createClient({ baseUrl: sim.url, apiKey: sim.apiKey as string });

process.stderr.write(`Simulator at ${sim.url}\n`);

// The plan allows 10 requests per second: space them, and wait as told when the server still says 429.
// (The scheduler does this for real pipelines, with adaptive concurrency and a credit meter.)
async function searchWithinPlan(params: Parameters<typeof client.search>[0]) {
  for (;;) {
    await sleep(100);
    try {
      return await client.search(params);
    } catch (error) {
      if (!(error instanceof RateLimitError)) throw error;
      await sleep(error.retryAfterMs ?? 1000);
    }
  }
}
const rows: string[] = ['query\tcountry\tpage\titems\tuntitled\tfirst result'];
for (const q of queries) {
  for (const country of countries) {
    for (let page = 1; page <= 2; page++) {
      const { data } = await searchWithinPlan({ q, country, lang: 'en', page, count: 10 });
      const untitled = data.filter((item) => item.title === undefined && item.name === undefined).length;
      const first = data[0];
      const url = String(first?.url ?? first?.link ?? '');
      rows.push(`${q}\t${country}\t${page}\t${data.length}\t${untitled}\t${url}`);
    }
  }
}
process.stdout.write(`${rows.join('\n')}\n`);
const stats = sim.stats();
process.stderr.write(
  `${stats.requests} requests, statuses ${JSON.stringify(stats.byStatus)}, credits debited ${stats.credits.demo?.debited} ` +
    `of 1000 (remaining ${stats.credits.demo?.remaining})\n`,
);
