// An engine-specific country or language code (Kosovo's "xk", Google's "iw") is allowed in one place and holds
// everywhere: what the source accepted, the client sends. It used to pass the source's validation and then fail
// every series at request time (the client had its own, separate allow-list).
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, pipelineFromConfig, searchPages, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

// The simulator knows ISO codes only: an engine that serves "xk" is scripted.
const XK_PAGE = { data: [{ title: 'Prishtina', url: 'https://prishtina.example/' }] };

describe('extra country and language codes: one allow-list', () => {
  it('a code allowed on the search source is sent by the client, not refused at request time', async () => {
    await using sim = await simulator();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 200, body: XK_PAGE, match: { country: 'xk' } });
    const summary = await runOn(
      sim,
      definePipeline({
        name: 'kosovo',
        source: searchPages({ queries: ['coffee'], countries: ['xk', 'al'], extraCountries: ['xk'], langs: ['sq', 'iw'], extraLangs: ['iw'], maxPages: 1 }),
        stages: [normalize()],
        sinks: [toSqlite({ path: dir.path('out.sqlite') })],
      }),
    );
    expect(summary.series).toMatchObject({ completed: 4, failed: 0 });
    expect(sim.log().map((entry) => { const params = new URLSearchParams(entry.query); return `${params.get('country')}/${params.get('lang')}`; }).sort()).toEqual(['al/iw', 'al/sq', 'xk/iw', 'xk/sq']);
    expect(sqliteRows(dir.path('out.sqlite'), `SELECT COUNT(*) AS n FROM results WHERE country = 'xk'`)).toEqual([{ n: 2 }]);
  });

  it('in a JSON config, api.extraCountries allows the code for the search source too', async () => {
    await using sim = await simulator();
    using dir = workdir();
    sim.inject({ fault: 'status', status: 200, body: XK_PAGE, match: { country: 'xk' } });
    const pipeline = pipelineFromConfig({
      name: 'kosovo-json',
      api: { extraCountries: ['xk'] },
      search: { queries: ['coffee'], countries: ['xk'], maxPages: 1 },
      sinks: [{ type: 'sqlite', path: dir.path('out.sqlite') }],
    });
    const summary = await runOn(sim, pipeline);
    expect(summary.series).toMatchObject({ completed: 1, failed: 0 });
    expect(sim.log().map((entry) => new URLSearchParams(entry.query).get('country'))).toEqual(['xk']);
  });
});
