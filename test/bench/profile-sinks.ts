// Profiles scenario (e)'s pipeline run alone (no raw baselines in the profile): `node test/bench/profile-sinks.ts sqlite|csv [queries] [out.cpuprofile]`.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Session } from 'node:inspector/promises';
import { dedupe, definePipeline, normalize, run, toCsv, toSqlite } from '../../src/index.ts';
import { bareFetch, CONCURRENCY, queryList, replay, setUp, timed } from './throughput.ts';

const kind = process.argv[2] === 'csv' ? 'csv' : 'sqlite';
const queries = Number(process.argv[3] ?? 200);
const out = process.argv[4] ?? `/tmp/sinks-${kind}.cpuprofile`;
const env = await setUp();
try {
  const { pages } = await bareFetch(env.url, env.apiKey, queryList(queries), true);
  const state = join(env.dir, 'state.sqlite');
  const sinks = kind === 'csv' ? [toCsv({ path: join(env.dir, 'out.csv') })] : [toSqlite({ path: state })];
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  const { ms } = await timed(() =>
    run(definePipeline({ name: `profile-${kind}`, source: replay(pages), stages: [normalize(), dedupe()], sinks, state: { path: state }, rate: { concurrency: CONCURRENCY } }), { baseUrl: env.url, apiKey: env.apiKey, env: {} }),
  );
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(out, JSON.stringify(profile));
  process.stderr.write(`${kind}: ${ms} ms; profile in ${out}\n`);
} finally {
  await env.close();
}
