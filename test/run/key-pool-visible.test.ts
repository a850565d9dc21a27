// A pool's keys made visible (docs/pipelines.md#a-pool-of-keys): the summary, the final lines, `runs`, `status`, the
// report, the metrics and `estimate` say each key's requests, credits, 429s and rates by its label, and a retired key
// when and why — never a key. From the command line, over real sockets, against a simulator holding the keys.
import { DatabaseSync } from 'node:sqlite';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/run/summary.ts';
import { startSimulator } from '../../src/simulator/index.ts';
import { cli, config, ROOT, runScraped, startCli } from '../cli-helpers.ts';
import { checkMetrics, promtoolAvailable, samples, total } from '../observability/prometheus.ts';
import { noKeyIn, workdir } from '../pipeline-helpers.ts';
import { describePostgres, testDatabase } from '../postgres/pg.ts';

const KEYS = { fast: 'sk_fast_1a2b3c4d5e6f7a8b', slow: 'sk_slow_9f8e7d6c5b4a3f2e', spare: 'sk_spare_0a1b2c3d4e5f6a7b' };
const POOL = `fast=${KEYS.fast}\nslow=${KEYS.slow}\nspare=${KEYS.spare}\n`;
const SEARCH = { queries: ['espresso', 'kettle', 'grinder'], countries: ['us', 'gb'], maxPages: 2 };

/** Three keys, the middle one revoked: answered 401 from its first request. */
function poolWithRevoked() {
  return startSimulator({
    keys: [
      { key: KEYS.fast, name: 'fast' },
      { key: KEYS.slow, name: 'slow', status: 'revoked' },
      { key: KEYS.spare, name: 'spare' },
    ],
  });
}

describe('a pool of keys, visible', () => {
  it('the summary, the final lines, runs, the report and the metrics carry each key by label, and the revoked one retired: when and why', async () => {
    await using sim = await poolWithRevoked();
    using dir = workdir();
    const file = config(dir.dir, { rate: { requestsPerSecond: 20, concurrency: 2 } }, SEARCH);
    const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL };
    const before = new Date().toISOString();
    const { scraped, result } = await runScraped(file, { cwd: dir.dir, env });
    expect(result.code, result.stderr).toBe(0);
    const summary = JSON.parse(result.stdout) as RunSummary;
    expect(summary.status).toBe('completed');

    // The summary: each key by label, its counts the simulator's own, the revoked one retired for the run.
    const keys = summary.keys ?? [];
    expect(keys.map((key) => key.label)).toEqual(['fast', 'slow', 'spare']);
    for (const key of keys) {
      expect(key.requests, key.label).toBe(sim.log().filter((entry) => entry.key === key.label).length);
      expect(key.rateLimited).toBe(sim.log().filter((entry) => entry.key === key.label && entry.status === 429).length);
      expect(key.rate).toBeGreaterThan(0);
    }
    expect(keys.reduce((sum, key) => sum + key.requests, 0)).toBe(summary.requests.total);
    expect(keys.reduce((sum, key) => sum + key.credits, 0)).toBe(summary.credits.spent);
    const slow = keys.find((key) => key.label === 'slow');
    expect(slow?.credits).toBe(0);
    expect(slow?.retired).toEqual({ reason: 'unauthorized', message: expect.stringContaining('401'), path: null, at: expect.any(String) });
    const retiredAt = slow?.retired?.at as string;
    expect(retiredAt >= before && retiredAt <= summary.finishedAt).toBe(true);
    expect(keys.filter((key) => key.retired !== null).map((key) => key.label)).toEqual(['slow']);

    // The final lines: the pool's keys, the retired one loudly, and what to do about it.
    expect(result.stderr).toMatch(/keys: fast \d+ req, (\d+×429, )?\d+ credits, [\d.]+ r\/s/);
    expect(result.stderr).toContain(`key slow retired at ${(slow?.retired?.at as string).replace('T', ' ').slice(0, 19)} (unauthorized: `);
    expect(result.stderr).toContain('check the key slow (retired: unauthorized) in WEBDATA_API_KEYS: the other keys did its share of this run');

    // The metrics: per key, by label; the run's own series still its totals; promtool accepts the page.
    if (promtoolAvailable) expect(checkMetrics(scraped)).toEqual({ status: 0, said: '' });
    const all = samples(scraped);
    for (const key of keys) {
      expect(total(all, 'webdata_etl_key_requests_total', { webdata_etl_key: key.label }), key.label).toBe(key.requests);
      expect(total(all, 'webdata_etl_key_credits_total', { webdata_etl_key: key.label })).toBe(key.credits);
      expect(total(all, 'webdata_etl_key_retired', { webdata_etl_key: key.label })).toBe(key.retired ? 1 : 0);
    }
    expect(total(all, 'webdata_etl_key_requests_total', { webdata_etl_key: 'slow', webdata_etl_status: '401' })).toBe(slow?.requests);
    expect(total(all, 'webdata_etl_key_rate', { webdata_etl_key: 'slow' })).toBe(0);
    // The summary rounds a rate to hundredths.
    expect(total(all, 'webdata_etl_key_rate', { webdata_etl_key: 'fast' })).toBeCloseTo(keys[0]?.rate as number, 1);
    expect(total(all, 'webdata_etl_requests_total')).toBe(summary.requests.total);
    expect(all.filter((sample) => sample.name === 'webdata_etl_requests_total').every((sample) => sample.labels.webdata_etl_key === undefined)).toBe(true);
    // A label is the only thing a series says of a key: no key, and no other value, in any label.
    const keyLabels = new Set(all.flatMap((sample) => (sample.labels.webdata_etl_key === undefined ? [] : [sample.labels.webdata_etl_key])));
    expect([...keyLabels].sort()).toEqual(['fast', 'slow', 'spare']);
    const doc = readFileSync(join(ROOT, 'docs/observability.md'), 'utf8');
    for (const name of ['webdata_etl_key_requests_total', 'webdata_etl_key_credits_total', 'webdata_etl_key_rate', 'webdata_etl_key_retired']) expect(doc).toContain(`\`${name}`);

    // runs: the keys in --json as the summary has them, and in the table's note.
    const runs = await cli(['runs', file, '--json'], { cwd: dir.dir });
    expect(runs.code, runs.stderr).toBe(0);
    expect((JSON.parse(runs.stdout.trim().split('\n').at(-1) as string) as { keys: unknown }).keys).toEqual(keys);
    const table = await cli(['runs', file], { cwd: dir.dir });
    expect(table.stdout).toMatch(/keys: fast \d+ req( \d+×429)?, slow \d+ req retired \(unauthorized\), spare \d+ req/);

    // The report: a table of the keys, the retired one marked.
    const report = await cli(['report', 'out/results.sqlite', '--out', 'report.html'], { cwd: dir.dir });
    expect(report.code, report.stderr).toBe(0);
    const html = readFileSync(dir.path('report.html'), 'utf8');
    expect(html).toContain(`Keys of run ${summary.runId}`);
    expect(html).toContain('<tr class="retired"><td>slow</td>');
    expect(html).toContain(`: unauthorized (`);
    noKeyIn(dir.dir, result.stdout + result.stderr + scraped + runs.stdout + table.stdout + html, Object.values(KEYS));
  });

  it('the report escapes what a tampered summary puts in a key’s label or message; runs reads a summary from before pools', async () => {
    await using sim = await poolWithRevoked();
    using dir = workdir();
    const file = config(dir.dir, {}, { ...SEARCH, maxPages: 1 });
    const run = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
    expect(run.code, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout) as RunSummary;
    // No rate set: each key unpaced, which JSON says as null (an infinite rate is no JSON number).
    expect(summary.keys?.map((key) => key.rate)).toEqual([null, null, null]);
    // Whoever can write the database can write anything into its summary.
    const db = new DatabaseSync(dir.path('out/results.sqlite'));
    const tampered = { ...summary, keys: summary.keys?.map((key) => (key.label === 'slow' ? { ...key, label: '<script>alert(1)</script>', retired: { ...key.retired, message: '<img src=x onerror=alert(2)>' } } : key)) };
    db.prepare('UPDATE runs SET summary = ? WHERE run_id = ?').run(JSON.stringify(tampered), summary.runId);
    db.close();
    const report = await cli(['report', 'out/results.sqlite', '--out', '-'], { cwd: dir.dir });
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toContain('<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>');
    expect(report.stdout).toContain('&lt;img src=x onerror=alert(2)&gt;');
    expect(report.stdout).not.toContain('<script>');
    expect(report.stdout).not.toContain('<img');
    expect(report.stdout).toContain('<td>fast</td>');
    expect(report.stdout).toContain('<td>unpaced</td>');

    // A summary from before pools (no keys) and one whose keys are not keys: runs shows the run, without keys.
    const again = new DatabaseSync(dir.path('out/results.sqlite'));
    const { keys: _keys, ...older } = summary;
    again.prepare('UPDATE runs SET summary = ? WHERE run_id = ?').run(JSON.stringify(older), summary.runId);
    again.close();
    const runs = await cli(['runs', file, '--json'], { cwd: dir.dir });
    expect(runs.code, runs.stderr).toBe(0);
    const shown = JSON.parse(runs.stdout.trim()) as Record<string, unknown>;
    expect(shown).toMatchObject({ runId: summary.runId, status: 'completed', requests: summary.requests.total });
    expect(shown).not.toHaveProperty('keys');
    const html = await cli(['report', 'out/results.sqlite', '--out', '-'], { cwd: dir.dir });
    expect(html.code).toBe(0);
    expect(html.stdout).not.toContain('Keys of run');
  });

  it('a resumed run: each key’s counts add up across its invocations, the retirement of the first kept; every key refused: the next step names them', async () => {
    await using sim = await poolWithRevoked();
    using dir = workdir();
    const file = config(dir.dir, { rate: { requestsPerSecond: 20, concurrency: 2 } }, { queries: ['a', 'b', 'c', 'd'], countries: ['us'], maxPages: 2 });
    const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL };
    // Ctrl-C while "d" is held in flight: the run cannot end before it.
    const d = sim.park({ q: 'd' });
    const running = startCli(['run', file, '--log-format', 'json'], { cwd: dir.dir, env });
    await running.printed('"event":"series"');
    await running.whileRunning(d.reached());
    running.child.kill('SIGINT');
    await running.printed('SIGINT: stopping');
    d.release();
    const interrupted = await running.done;
    expect(interrupted.code).toBe(130);
    const first = JSON.parse(interrupted.stdout) as RunSummary;
    expect(first.status).toBe('interrupted');
    const firstSlow = first.keys?.find((key) => key.label === 'slow');
    expect(firstSlow?.retired?.reason).toBe('unauthorized');

    // The next invocation resumes the run: each key's counts add to the first's, and slow stays said retired — by the
    // first invocation's 401, or by this one's if it was sent a request again.
    const resumed = await cli(['run', file], { cwd: dir.dir, env });
    expect(resumed.code, resumed.stderr).toBe(0);
    const summary = JSON.parse(resumed.stdout) as RunSummary;
    expect(summary.runId).toBe(first.runId);
    for (const key of summary.keys ?? []) expect(key.requests, key.label).toBe(sim.log().filter((entry) => entry.key === key.label).length);
    expect(summary.keys?.reduce((sum, key) => sum + key.requests, 0)).toBe(summary.requests.total);
    const slow = summary.keys?.find((key) => key.label === 'slow')?.retired;
    expect(slow).toMatchObject({ reason: 'unauthorized', path: null });
    expect((slow?.at as string) >= (firstSlow?.retired?.at as string)).toBe(true);

    // Every key refused: the run stops (exit 3) and says which keys to fix, where.
    await using refusing = await startSimulator({ keys: [{ key: KEYS.fast, name: 'fast', status: 'revoked' }, { key: KEYS.slow, name: 'slow', status: 'revoked' }] });
    const refused = await cli(['run', config(dir.dir, { name: 'refused', sinks: [{ type: 'sqlite', path: 'refused/results.sqlite' }] })], { cwd: dir.dir, env: { WEBDATA_BASE_URL: refusing.url, WEBDATA_API_KEYS: `fast=${KEYS.fast},slow=${KEYS.slow}` } });
    expect(refused.code, refused.stderr).toBe(3);
    expect(refused.stderr).toContain('fix the keys fast (retired: unauthorized), slow (retired: unauthorized) in WEBDATA_API_KEYS, then run the same command');
    noKeyIn(dir.dir, interrupted.stdout + interrupted.stderr + resumed.stdout + resumed.stderr + refused.stdout + refused.stderr, Object.values(KEYS));
  });

  it('one key: the summary has no keys (its figures are the run’s), and the final lines none', async () => {
    await using sim = await startSimulator({ keys: [{ key: KEYS.fast, name: 'fast' }] });
    using dir = workdir();
    const result = await cli(['run', config(dir.dir, {}, { ...SEARCH, maxPages: 1 })], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEY: KEYS.fast } });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).not.toHaveProperty('keys');
    expect(result.stderr).not.toContain('keys:');
  });

  it('estimate: the pool’s worst-case time at its keys’ rates, from the environment’s labels alone; nothing sent; none without keys', async () => {
    await using sim = await startSimulator({ keys: [{ key: KEYS.fast, name: 'fast' }] });
    using dir = workdir();
    // 3 queries × 2 countries × 5 pages: 30 requests, at 4 + 1 + 1 requests a second together: 5 s.
    const file = config(dir.dir, { rate: { requestsPerSecond: 4 }, keys: { slow: { requestsPerSecond: 1 }, spare: { requestsPerSecond: 1 } } }, { ...SEARCH, maxPages: 5 });
    const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL };
    const text = await cli(['estimate', file], { cwd: dir.dir, env });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('requests (worst case): 30');
    expect(text.stdout).toContain('keys: 3 keys from WEBDATA_API_KEYS (fast 4 r/s, slow 1 r/s, spare 1 r/s), 6 requests/s together');
    expect(text.stdout).toContain("time (worst case, at the keys' rates): 5s");
    const json = JSON.parse((await cli(['estimate', file, '--json'], { cwd: dir.dir, env })).stdout);
    expect(json.keys).toEqual({
      from: 'WEBDATA_API_KEYS',
      keys: [
        { label: 'fast', requestsPerSecond: 4 },
        { label: 'slow', requestsPerSecond: 1 },
        { label: 'spare', requestsPerSecond: 1 },
      ],
      requestsPerSecond: 6,
      worstCaseSeconds: 5,
    });
    // No key in the environment: as before pools (the settings name labels no environment holds, and nothing says so).
    const bare = await cli(['estimate', file, '--json'], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url } });
    expect(bare.code, bare.stderr).toBe(0);
    expect(JSON.parse(bare.stdout)).not.toHaveProperty('keys');
    // A setting for a label the environment does not hold: refused, as run refuses it.
    const mistyped = await cli(['estimate', config(dir.dir, { keys: { fsat: { requestsPerSecond: 2 } } })], { cwd: dir.dir, env });
    expect(mistyped.code).toBe(2);
    expect(mistyped.stderr).toContain('keys.fsat: no key is labelled "fsat": WEBDATA_API_KEYS holds "fast", "slow", "spare"');
    expect(sim.stats().requests).toBe(0);
    noKeyIn(dir.dir, text.stdout + text.stderr + JSON.stringify(json) + mistyped.stderr, Object.values(KEYS));
  });
});

describePostgres('a pool of keys in status (state in PostgreSQL, one process)', () => {
  it('status shows the keys of the run’s last summary, the retired one with when and why; --json as the summary has them', async () => {
    await using sim = await poolWithRevoked();
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { name: 'pooled', state: { url: db.url }, rate: { requestsPerSecond: 20 } }, SEARCH);
      const result = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEYS: POOL } });
      expect(result.code, result.stderr).toBe(0);
      const summary = JSON.parse(result.stdout) as RunSummary;
      const slow = summary.keys?.find((key) => key.label === 'slow');
      expect(slow?.retired?.reason).toBe('unauthorized');
      const status = await cli(['status', file], { cwd: dir.dir });
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain(`pooled: run ${summary.runId}, completed`);
      expect(status.stdout).toMatch(/keys: fast \d+ req, /);
      expect(status.stdout).toContain(`key slow retired at ${(slow?.retired?.at as string).replace('T', ' ').slice(0, 19)} (unauthorized: `);
      const json = await cli(['status', file, '--json'], { cwd: dir.dir });
      expect((JSON.parse(json.stdout) as { summaryKeys: unknown }).summaryKeys).toEqual(summary.keys);
      noKeyIn(dir.dir, result.stdout + result.stderr + status.stdout + json.stdout, Object.values(KEYS));
    } finally {
      await db.drop();
    }
  });
});
