import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dedupe, normalize, pipelineFromConfig, searchPages, toCsv, toSqlite } from '../../src/index.ts';
import { simulator } from '../helpers.ts';
import { csvRows, runOn, sqliteRows, workdir } from '../pipeline-helpers.ts';

describe('queries from files', () => {
  it('one per line: blank lines and repeats are dropped, reported, and never sent twice', async () => {
    await using sim = await simulator();
    using dir = workdir();
    writeFileSync(dir.path('queries.txt'), '\uFEFFespresso\r\n\r\nkettle\n  espresso  \ngrinder\n   \n');
    const source = searchPages({ queriesFile: dir.path('queries.txt'), maxPages: 1 });
    expect(source.dropped).toEqual({ blank: 2, duplicate: 1 });
    expect(source.plan().notes).toEqual(['queries: 1 repeated and 2 blank dropped (never sent twice)']);
    const notes: string[] = [];
    await runOn(
      sim,
      { name: 'txt', source, stages: [normalize()], sinks: [toSqlite({ path: dir.path('t.sqlite') })] },
      { onEvent: (e) => e.type === 'start' && notes.push(...e.notes) },
    );
    expect(notes).toHaveLength(1);
    const sent = sim.log().map((e) => new URLSearchParams(e.query).get('q'));
    expect(sent.sort()).toEqual(['espresso', 'grinder', 'kettle']);
  });

  it('CSV: the other columns are carried into every row as tags, in SQLite and CSV', async () => {
    await using sim = await simulator();
    using dir = workdir();
    writeFileSync(dir.path('keywords.csv'), 'Category,Keyword,Priority %,rank\r\nkitchen,espresso machine,1,a\r\n"outdoor, gear",trail shoes,2,b\r\nkitchen,espresso machine,3,c\r\n');
    await runOn(sim, {
      name: 'csv-tags',
      source: searchPages({ queriesFile: dir.path('keywords.csv'), countries: ['us', 'gb'], maxPages: 1 }),
      stages: [normalize(), dedupe()],
      sinks: [toSqlite({ path: dir.path('k.sqlite') }), toCsv({ path: dir.path('k.csv') })],
    });
    const rows = sqliteRows(dir.path('k.sqlite'), 'SELECT query, country, category, priority, tag_rank FROM results GROUP BY query, country ORDER BY query, country');
    expect(rows).toEqual([
      { query: 'espresso machine', country: 'gb', category: 'kitchen', priority: '1', tag_rank: 'a' },
      { query: 'espresso machine', country: 'us', category: 'kitchen', priority: '1', tag_rank: 'a' },
      { query: 'trail shoes', country: 'gb', category: 'outdoor, gear', priority: '2', tag_rank: 'b' },
      { query: 'trail shoes', country: 'us', category: 'outdoor, gear', priority: '2', tag_rank: 'b' },
    ]);
    const csv = csvRows(dir.path('k.csv'));
    expect(Object.keys(csv[0] ?? {}).slice(-3)).toEqual(['category', 'priority', 'tag_rank']);
    expect(new Set(csv.map((r) => r.category))).toEqual(new Set(['kitchen', 'outdoor, gear']));
    // The repeated keyword was sent once per country, with the first line's tags.
    expect(sim.stats().requests).toBe(4);
  });

  it('a new tag column joins an existing table; JSON configs take queriesFile', async () => {
    await using sim = await simulator();
    using dir = workdir();
    writeFileSync(dir.path('a.csv'), 'query\r\nespresso\r\n');
    writeFileSync(dir.path('b.csv'), 'query,segment\r\nespresso,premium\r\n');
    const config = (file: string) => ({ name: 'grow', search: { queriesFile: dir.path(file), maxPages: 1 }, sinks: [{ type: 'sqlite', path: dir.path('g.sqlite') }] });
    await runOn(sim, pipelineFromConfig(config('a.csv')));
    await runOn(sim, pipelineFromConfig(config('b.csv')));
    const segments = sqliteRows(dir.path('g.sqlite'), 'SELECT DISTINCT segment FROM results ORDER BY segment');
    expect(segments).toEqual([{ segment: null }, { segment: 'premium' }]);
    expect(() => searchPages({ queriesFile: dir.path('missing.txt') })).toThrow(/search\.queriesFile: cannot be read/);
    expect(() => searchPages({})).toThrow(/search\.queries: must hold at least one query \(or give queriesFile\)/);
  });
});
