// `webdata-etl prune` from the command line (docs/cli.md#prune) and `retention` in a pipeline (docs/pipelines.md#retention):
// a pipeline file's retention, a dry run then --yes, `runs` after; a database pruned by --runs and --spend; every bad
// retention or usage refused with exit 2, naming the field, before anything is removed or any credit spent.
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, searchPages, toCsv } from '../../src/index.ts';
import { cli, config, envFor } from '../cli-helpers.ts';
import { expectRefused, simulator, thrown } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

const SEARCH = { queries: ['espresso'], countries: ['us', 'gb'], maxPages: 2 };
const count = (path: string, table: string) => Number(sqliteRows(path, `SELECT count(*) AS n FROM ${table}`)[0]?.n);

describe('webdata-etl prune', () => {
  it("a pipeline file's retention: a dry run says what would go and removes nothing; --yes removes it; runs lists what is kept", async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { name: 'daily', retention: { runs: 1 } }, SEARCH);
    // Before its first run: no state file, nothing to prune, none made.
    const early = await cli(['prune', file], { cwd: dir.dir });
    expect(early.code, early.stderr).toBe(0);
    expect(early.stderr).toContain('nothing to prune:');
    expect(existsSync(dir.path('out/results.sqlite'))).toBe(false);
    for (let i = 0; i < 3; i++) {
      const ran = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
      expect(ran.code, ran.stderr).toBe(0);
    }
    const state = dir.path('out/results.sqlite');
    const results = count(state, 'results');
    expect(count(state, 'runs')).toBe(3);

    const dry = await cli(['prune', file], { cwd: dir.dir });
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('a dry run, nothing removed (--yes removes it)');
    expect(dry.stdout).toContain("daily: 2 runs' records to remove, 1 kept");
    expect(dry.stdout).toMatch(/series\s+4 rows/);
    expect(dry.stdout).toMatch(/about [0-9.]+ (B|KiB|MiB)/);
    expect(count(state, 'runs')).toBe(3);

    const removed = await cli(['prune', file, '--yes', '--json'], { cwd: dir.dir });
    expect(removed.code, removed.stderr).toBe(0);
    const report = JSON.parse(removed.stdout) as { dryRun: boolean; pipelines: { pipeline: string; runs: string[]; kept: number }[]; rows: Record<string, number> };
    expect(report).toMatchObject({ dryRun: false, pipelines: [{ pipeline: 'daily', kept: 1 }], rows: { runs: 2, series: 4 } });
    expect(count(state, 'runs')).toBe(1);
    expect(count(state, 'results')).toBe(results);
    const runs = await cli(['runs', file, '--json'], { cwd: dir.dir });
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stdout.trim().split('\n')).toHaveLength(1);
    // Nothing left past the retention: a second prune removes nothing.
    const again = await cli(['prune', file, '--yes'], { cwd: dir.dir });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('nothing was removed');
  });

  it('a database by --runs and --spend; --spend under 400d refused while the database records an allowance', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { name: 'capped', allowance: { credits: 1000, per: 'month' } }, SEARCH);
    for (let i = 0; i < 2; i++) expect((await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
    const state = dir.path('out/results.sqlite');

    const none = await cli(['prune', state], { cwd: dir.dir });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('give --runs <n> and/or --spend <days>');
    for (const [flags, says] of [
      [['--runs', 'x'], '--runs must be a whole number of runs'],
      [['--runs', '0'], '--runs must be a whole number of runs'],
      [['--spend', 'a year'], '--spend must be a number of days such as "400d", or "forever"'],
    ] as const) {
      const bad = await cli(['prune', state, ...flags], { cwd: dir.dir });
      expect(bad.code, bad.stderr).toBe(2);
      expect(bad.stderr).toContain(says);
    }
    const short = await cli(['prune', state, '--spend', '30d', '--yes'], { cwd: dir.dir });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('--spend: must be at least "400d"');
    expect(count(state, 'spend')).toBeGreaterThan(0);

    const kept = count(state, 'spend');
    const pruned = await cli(['prune', state, '--runs', '1', '--spend', '400d', '--pipeline', 'capped', '--yes', '--json'], { cwd: dir.dir });
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ dryRun: false, rows: { runs: 1 } });
    // Written today: a year's spend keeps it all.
    expect(count(state, 'spend')).toBe(kept);
  });

  it("a bad retention in a pipeline file is refused naming the field, exit 2, by prune and by run before any request", async () => {
    await using sim = await simulator();
    using dir = workdir();
    for (const [retention, extra, field, says] of [
      [{ runs: 0 }, {}, 'retention.runs', 'must be a whole number of runs, 1 or more'],
      [{ runs: 2.5 }, {}, 'retention.runs', 'must be a whole number of runs'],
      [{ spend: '1 year' }, {}, 'retention.spend', 'must be a number of days such as "400d", or "forever"'],
      [{ spend: '30d' }, { allowance: { credits: 10, per: 'day' } }, 'retention.spend', 'must be at least "400d"'],
      [{ kept: 3 }, {}, 'retention', 'kept'],
      [{ journal: 'forever' }, {}, 'retention.journal', 'must be "until-complete"'],
    ] as const) {
      const file = config(dir.dir, { retention, ...extra }, SEARCH);
      for (const command of ['prune', 'run']) {
        const refused = await cli([command, file], { cwd: dir.dir, env: envFor(sim.url) });
        expect(refused.code, `${command} ${JSON.stringify(retention)}: ${refused.stderr}`).toBe(2);
        expect(refused.stderr).toContain(field);
        expect(refused.stderr).toContain(says);
      }
    }
    expect(sim.stats().requests).toBe(0);
  });
});

describe('retention in definePipeline', () => {
  const pipeline = (settings: Record<string, unknown>) => ({ name: 'p', source: searchPages(SEARCH), stages: [normalize()], sinks: [toCsv({ path: 'x.csv' })], ...settings });

  it('takes runs, journal and spend, and refuses a spend shorter than an allowance needs, naming the field', async () => {
    expect(definePipeline(pipeline({ retention: { runs: 90, spend: '400d' }, allowance: { credits: 5, per: 'day' } })).retention).toEqual({ runs: 90, spend: '400d' });
    expect(definePipeline(pipeline({ retention: { spend: '30d' } })).retention).toEqual({ spend: '30d' });
    // The words (43, item 4): the journal kept until a later run completed, which is what `runs` does with it.
    expect(definePipeline(pipeline({ retention: { runs: 90, journal: 'until-complete' } })).retention).toEqual({ runs: 90, journal: 'until-complete' });
    expect(definePipeline(pipeline({ retention: { spend: 'forever' }, allowance: { credits: 5, per: 'month' } })).retention).toEqual({ spend: 'forever' });
    expectRefused(await thrown(() => definePipeline(pipeline({ retention: { runs: -1 } }))), 'retention.runs', /whole number of runs, 1 or more/);
    expectRefused(await thrown(() => definePipeline(pipeline({ retention: { spend: '0d' } }))), 'retention.spend', /number of days such as "400d"/);
    expectRefused(
      await thrown(() => definePipeline(pipeline({ retention: { spend: '399d' }, keys: { main: { allowance: { credits: 5, per: 'month' } } } }))),
      'retention.spend',
      /at least "400d" \(or "forever"\) while an allowance is declared/,
    );
  });
});
