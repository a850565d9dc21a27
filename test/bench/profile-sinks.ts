// Profiles scenario (e)'s pipeline run alone (no raw baselines in the profile), or (f)'s (`e2e`: search → SQLite and CSV
// against the simulator in this process): `node test/bench/profile-sinks.ts sqlite|csv|e2e [queries] [out.cpuprofile]`.
// The run's thread only: the commit thread is another isolate.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Session } from 'node:inspector/promises';
import { dedupe, definePipeline, normalize, run, searchPages, toCsv, toSqlite } from '../../src/index.ts';
import { bareFetch, CONCURRENCY, PAGES_PER_QUERY, PER_PAGE, queryList, replay, setUp, timed } from './throughput.ts';

const kind = process.argv[2] === 'csv' || process.argv[2] === 'e2e' ? process.argv[2] : 'sqlite';
const queries = Number(process.argv[3] ?? 200);
const out = process.argv[4] ?? `/tmp/sinks-${kind}.cpuprofile`;
const env = await setUp();
try {
  const list = queryList(queries);
  const source = kind === 'e2e' ? searchPages({ queries: list, maxPages: PAGES_PER_QUERY, count: PER_PAGE }) : replay((await bareFetch(env.url, env.apiKey, list, true)).pages);
  const state = join(env.dir, 'state.sqlite');
  const csv = toCsv({ path: join(env.dir, 'out.csv') });
  const sinks = kind === 'csv' ? [csv] : kind === 'e2e' ? [toSqlite({ path: state }), csv] : [toSqlite({ path: state })];
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  const { ms } = await timed(() =>
    run(definePipeline({ name: `profile-${kind}`, source, stages: [normalize(), dedupe()], sinks, state: { path: state }, rate: { concurrency: CONCURRENCY } }), { baseUrl: env.url, apiKey: env.apiKey, env: {} }),
  );
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(out, JSON.stringify(profile));
  process.stderr.write(`${kind}: ${ms} ms; profile in ${out}\n`);
} finally {
  await env.close();
}
