import { readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, searchPages, toCsv, toJsonl, toSqlite } from '../../src/index.ts';
import { cli, envFor } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { csvRows, runOn, workdir } from '../pipeline-helpers.ts';

/** A JSON config of a pipeline named `name` whose sinks are given; each its own state store unless one is given. */
function pipelineFile(dir: string, name: string, sinks: Record<string, unknown>[], extra: Record<string, unknown> = {}) {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ name, search: { queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 3 }, sinks, ...extra }));
  return file;
}

describe('one writer per output: files owned by their pipeline, leased while written', () => {
  it('2: a pipeline may not write a file another pipeline owns (its resume would cut the other’s rows)', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const alpha = pipelineFile(dir.dir, 'alpha', [{ type: 'sqlite', path: 'alpha/results.sqlite' }, { type: 'csv', path: 'shared/results.csv' }]);
    const beta = pipelineFile(dir.dir, 'beta', [{ type: 'sqlite', path: 'beta/results.sqlite' }, { type: 'csv', path: 'shared/results.csv' }]);
    // Alpha dies with a page written to the CSV and not yet committed.
    const killed = await cli(['run', alpha], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_CRASH_AT: 'file-before-checkpoint:3' } });
    expect(killed.code).toBe(null);
    const csvBefore = readFileSync(dir.path('shared/results.csv'));

    const refused = await cli(['run', beta], { cwd: dir.dir, env: envFor(sim.url) });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('pipeline "alpha"');
    expect(refused.stderr).toContain('pipeline "beta"');
    expect(refused.stderr).toContain('shared: true');
    expect(readFileSync(dir.path('shared/results.csv'))).toEqual(csvBefore);

    // Alpha resumes and completes; its file holds its rows once each.
    const resumed = await cli(['run', alpha], { cwd: dir.dir, env: envFor(sim.url) });
    expect(resumed.code).toBe(0);
    const summary = JSON.parse(resumed.stdout);
    expect(csvRows(dir.path('shared/results.csv'))).toHaveLength(summary.items.written);
    expect(summary.outputs).toContainEqual({ kind: 'csv', path: dir.path('shared/results.csv'), delivery: 'exactly_once' });
  });

  it('shared by pipelines that both say so: appends only, never cut back, at least once — the other pipeline’s rows stay', async () => {
    await using sim = await simulator({ seed: 5 });
    using dir = workdir();
    const csv = { type: 'csv', path: 'shared/results.csv', shared: true };
    const alpha = pipelineFile(dir.dir, 'alpha', [{ type: 'sqlite', path: 'alpha/results.sqlite' }, csv]);
    const beta = pipelineFile(dir.dir, 'beta', [{ type: 'sqlite', path: 'beta/results.sqlite' }, csv]);
    expect((await cli(['run', alpha], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_CRASH_AT: 'file-before-checkpoint:3' } })).code).toBe(null);
    const byBeta = await cli(['run', beta], { cwd: dir.dir, env: envFor(sim.url) });
    expect(byBeta.code).toBe(0);
    const betaRun = JSON.parse(byBeta.stdout);

    const resumed = await cli(['run', alpha], { cwd: dir.dir, env: envFor(sim.url) });
    expect(resumed.code).toBe(0);
    const alphaRun = JSON.parse(resumed.stdout);
    expect(alphaRun.outputs).toContainEqual({ kind: 'csv', path: dir.path('shared/results.csv'), delivery: 'at_least_once' });
    const rows = csvRows(dir.path('shared/results.csv'));
    // Every row beta wrote is still there; alpha's are all there too, the page cut short by the kill perhaps twice.
    expect(rows.filter((row) => row.run_id === betaRun.runId)).toHaveLength(betaRun.items.written);
    const alphaRows = rows.filter((row) => row.run_id === alphaRun.runId).length;
    expect(alphaRows).toBeGreaterThanOrEqual(alphaRun.items.written);
    expect(rows).toHaveLength(betaRun.items.written + alphaRows);
  });

  it('75: two pipelines writing one SQLite table, one CSV file or one state store at once — the second is refused, naming the first', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const cases = [
      // The same table of a database, each pipeline with its own state store.
      {
        sinks: [{ type: 'sqlite', path: 'shared/db.sqlite' }],
        extra: (name: string) => ({ state: { path: `${name}/state.sqlite` } }),
        expected: 'the table "results" of',
      },
      // The same CSV file (both would share it: the lease still allows one writer at a time).
      { sinks: [{ type: 'csv', path: 'shared/results.csv', shared: true }], extra: (name: string) => ({ state: { path: `${name}/state.sqlite` } }), expected: 'results.csv is being written by' },
      // Two pipelines whose state lives in one file: its journal cannot take two writers.
      { sinks: [{ type: 'sqlite', path: 'one/db.sqlite', table: 'results' }], other: [{ type: 'sqlite', path: 'one/db.sqlite', table: 'others' }], expected: 'is in use by pipeline "first' },
    ];
    for (const [index, c] of cases.entries()) {
      const first = pipelineFile(dir.dir, `first${index}`, c.sinks, c.extra?.(`first${index}`));
      const second = pipelineFile(dir.dir, `second${index}`, c.other ?? c.sinks, c.extra?.(`second${index}`));
      const gate = sim.park();
      const running = cli(['run', first], { cwd: dir.dir, env: envFor(sim.url) });
      await gate.reached();
      const refused = await cli(['run', second], { cwd: dir.dir, env: envFor(sim.url) });
      gate.release();
      expect(refused.code, refused.stderr).toBe(75);
      expect(refused.stderr).toContain(c.expected);
      expect(refused.stderr).toContain(`pipeline "first${index}"`);
      expect((await running).code).toBe(0);
      // Once the first has finished, the second runs.
      expect((await cli(['run', second], { cwd: dir.dir, env: envFor(sim.url) })).code).toBe(0);
    }
  });

  it('2: two sinks of one pipeline on the same file or table, or a file sink on the state store', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const same = pipelineFile(dir.dir, 'twice', [{ type: 'sqlite', path: 'out/r.sqlite' }, { type: 'csv', path: 'out/r.csv' }, { type: 'jsonl', path: 'out/r.csv' }]);
    const sameResult = await cli(['run', same], { cwd: dir.dir, env: envFor(sim.url) });
    expect(sameResult.code).toBe(2);
    expect(sameResult.stderr).toContain('sinks.2: writes');
    const onState = pipelineFile(dir.dir, 'onstate', [{ type: 'csv', path: 'out/s.csv' }], { state: { path: 'out/s.csv' } });
    const onStateResult = await cli(['run', onState], { cwd: dir.dir, env: envFor(sim.url) });
    expect(onStateResult.code).toBe(2);
    expect(onStateResult.stderr).toContain('which is the state store');
    expect(sim.stats().requests).toBe(0);
  });

  it('an output file replaced by another is not cut back to the old one’s checkpoint', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = pipelineFile(dir.dir, 'replaced', [{ type: 'sqlite', path: 'out/r.sqlite' }, { type: 'csv', path: 'out/r.csv' }]);
    expect((await cli(['run', file], { cwd: dir.dir, env: { ...envFor(sim.url), WEBDATA_CRASH_AT: 'file-before-checkpoint:2' } })).code).toBe(null);
    // Someone puts another (longer) file in its place: today's sink would cut it to the old file's committed length.
    const other = `${readFileSync(dir.path('out/r.csv'), 'utf8')}${'their own line,,,\r\n'.repeat(50)}`;
    writeFileSync(dir.path('out/r.csv.new'), other);
    renameSync(dir.path('out/r.csv.new'), dir.path('out/r.csv'));
    const refused = await cli(['run', file], { cwd: dir.dir, env: envFor(sim.url) });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('another file was put in its place');
    expect(readFileSync(dir.path('out/r.csv'), 'utf8')).toBe(other);
  });
});

describe('file modes', () => {
  it('the state store, its WAL, the output registry and every output file are created 0600 (a stricter umask narrows them)', async () => {
    await using sim = await simulator();
    for (const [umask, mode] of [
      [0o022, 0o600],
      [0o077, 0o600],
      [0o277, 0o400],
    ] as const) {
      using dir = workdir();
      const previous = process.umask(umask);
      try {
        await runOn(
          sim,
          definePipeline({
            name: 'modes',
            source: searchPages({ queries: ['a'], maxPages: 1 }),
            stages: [normalize()],
            sinks: [toSqlite({ path: dir.path('out/r.sqlite') }), toCsv({ path: dir.path('csv/r.csv') }), toJsonl({ path: dir.path('csv/r.jsonl') })],
          }),
        );
      } finally {
        process.umask(previous);
      }
      // Every file the run left (the WAL and shared-memory files go when the last connection closes).
      const files = readdirSync(dir.dir, { recursive: true, encoding: 'utf8' }).filter((name) => statSync(dir.path(name)).isFile());
      expect(files).toEqual(expect.arrayContaining(['out/r.sqlite', 'csv/r.csv', 'csv/r.jsonl', 'csv/.webdata-outputs.sqlite']));
      for (const file of files) expect([file, statSync(dir.path(file)).mode & 0o777]).toEqual([file, mode]);
    }
  });
});
