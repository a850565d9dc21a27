// A simulated day from the command line (issue 42, item 5): WEBDATA_SIMULATOR_DAY gives `run --simulator` (and `worker
// --simulator`) a simulator that answers as on that day, so that two runs of the same day, whenever they run, fetch the
// same rows; `simulate --day`. Bad values refused with exit 2 before anything starts. As a user runs them.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { createClient } from '../../src/client/index.ts';
import { cli, config, startCli } from '../cli-helpers.ts';
import { until } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';

/** The CSV's rows as records, without what differs between runs by nature (the run's id, the time of the fetch). */
function rowsOf(dir: string): Record<string, string>[] {
  const [header, ...rows] = parseCsv(readFileSync(join(dir, 'out/results.csv'), 'utf8'));
  const records = rows.map((row) => Object.fromEntries((header ?? []).flatMap((name, i) => (name === 'run_id' || name === 'fetched_at' ? [] : [[name, row[i] ?? '']]))));
  // In the series' order, not the file's: concurrent series commit in the order their answers come.
  const key = (r: Record<string, string>) => [r.query, r.country, r.lang, String(r.page).padStart(4, '0'), String(r.position).padStart(4, '0')].join('\u0001');
  return records.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** RFC 4180 as the CSV sink writes it: fields quoted when they hold a comma, a quote or a line break. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (field += '"'), i++;
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(field), (field = '');
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field), rows.push(row), (row = []), (field = '');
    } else field += c;
  }
  if (field !== '' || row.length > 0) row.push(field), rows.push(row);
  return rows;
}

describe('run --simulator on a simulated day', () => {
  it('two runs of day 4, seconds apart, fetch the same rows (the simulator drifts every 5 s without a day)', async () => {
    using first = workdir();
    using second = workdir();
    for (const dir of [first.dir, second.dir]) {
      const result = await cli(['run', config(dir), '--simulator'], { cwd: dir, env: { WEBDATA_SIMULATOR_DAY: '4' } });
      expect(result.code, result.stderr).toBe(0);
    }
    const rows = rowsOf(first.dir);
    expect(rows.length).toBeGreaterThan(20);
    expect(rowsOf(second.dir)).toEqual(rows);
  }, 60_000);

  it("fetches the day's ranking: each domain's best rank is the simulator's ground truth for day 9", async () => {
    using dir = workdir();
    const file = config(dir.dir, {}, { queries: ['espresso'], countries: ['us'], maxPages: 3 });
    const result = await cli(['run', file, '--simulator'], { cwd: dir.dir, env: { WEBDATA_SIMULATOR_DAY: '9' } });
    expect(result.code, result.stderr).toBe(0);
    // The CLI's simulator is the default seed's; its ground truth is the same from any simulator of that seed.
    await using truth = await startSimulator({ day: 9 });
    const best = new Map<string, number>();
    for (const row of rowsOf(dir.dir)) best.set(row.domain as string, Math.min(best.get(row.domain as string) ?? Infinity, Number(row.rank)));
    expect(best.size).toBeGreaterThan(5);
    for (const [domain, rank] of best) expect([domain, rank]).toEqual([domain, truth.rankOf({ q: 'espresso', country: 'us' }, domain)]);
  }, 60_000);

  it('simulate --day 6 serves the ranking of day 6 (the ground truth of its seed) until stopped', async () => {
    using dir = workdir();
    const simulate = startCli(['simulate', '--port', '0', '--seed', '4', '--day', '6'], { cwd: dir.dir });
    await simulate.whileRunning(until(() => /^WEBDATA_API_KEY=.*\n/m.test(simulate.output().stdout)));
    const vars = Object.fromEntries(simulate.output().stdout.trim().split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
    await using client = createClient({ baseUrl: vars.WEBDATA_BASE_URL as string, apiKey: vars.WEBDATA_API_KEY as string });
    const page = await client.search({ q: 'kettle', country: 'gb', page: 2, count: 10 });
    await using truth = await startSimulator({ seed: 4, day: 6 });
    expect(page.data.map((item) => String(item.url ?? item.link))).toEqual(truth.ranking({ q: 'kettle', country: 'gb' }).slice(10, 20).map((r) => r.url));
    simulate.child.kill('SIGTERM');
    expect((await simulate.done).code).toBe(0);
  }, 60_000);

  it('2: WEBDATA_SIMULATOR_DAY that is not a day from 0 to 3650, before anything starts; simulate --day checked alike', async () => {
    using dir = workdir();
    for (const value of ['tomorrow', '-1', '3651', '2.5']) {
      const result = await cli(['run', config(dir.dir), '--simulator'], { cwd: dir.dir, env: { WEBDATA_SIMULATOR_DAY: value } });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain('WEBDATA_SIMULATOR_DAY must be a simulated day, a whole number from 0 to 3650');
      expect(result.stderr).not.toContain('simulator at');
    }
    expect(existsSync(join(dir.dir, 'out'))).toBe(false);
    const bad = await cli(['simulate', '--port', '0', '--day', 'monday'], { cwd: dir.dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--day must be a simulated day');
    const both = await cli(['simulate', '--port', '0', '--day', '3', '--drift-every', '5s'], { cwd: dir.dir });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--day and --drift-every contradict each other');
  }, 60_000);
});
