// A key's allowance in the metrics (docs/observability.md#metrics): the allowance, what is left of its period (every
// pipeline's spend counted, as the ledger last said it) and when the period ends, by key label — one key included, since
// what binds it is across runs. From the command line, scraped from its Prometheus endpoint, against the simulator.
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/run/summary.ts';
import { periodAt } from '../../src/schedule/allowance-period.ts';
import { cli, config, runScraped } from '../cli-helpers.ts';
import { simulator, TEST_KEY } from '../helpers.ts';
import { checkMetrics, promtoolAvailable, samples, total } from '../observability/prometheus.ts';
import { workdir } from '../pipeline-helpers.ts';

const SEARCH = { queries: ['espresso', 'kettle'], countries: ['us'], maxPages: 2 };

describe('an allowance in the metrics', () => {
  it('the allowance, what is left of the period after every pipeline spent, and when the period ends, by key label', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const env = { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEY: TEST_KEY };
    const allowance = { credits: 100, per: 'month', timezone: 'Europe/Berlin' };
    // Another pipeline sharing the state file spends first: 2 queries × 2 pages.
    const first = await cli(['run', config(dir.dir, { name: 'first', allowance, state: { path: 'state.sqlite' }, sinks: [{ type: 'csv', path: 'first.csv' }] }, SEARCH)], { cwd: dir.dir, env });
    expect(first.code, first.stderr).toBe(0);
    const file = config(dir.dir, { name: 'second', state: { path: 'state.sqlite' }, sinks: [{ type: 'csv', path: 'second.csv' }] }, { ...SEARCH, queries: ['grinder'] });
    const { scraped, result } = await runScraped(file, { cwd: dir.dir, env });
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as RunSummary).credits.spent).toBe(2);

    if (promtoolAvailable) expect(checkMetrics(scraped)).toEqual({ status: 0, said: '' });
    const all = samples(scraped);
    const key = { webdata_etl_key: 'default', webdata_etl_pipeline: 'second' };
    expect(total(all, 'webdata_etl_key_allowance', key)).toBe(100);
    // 4 credits of the first pipeline and 2 of this one, of 100: the simulator's own count of paid requests.
    expect(sim.log().filter((entry) => entry.status === 200)).toHaveLength(6);
    expect(total(all, 'webdata_etl_key_allowance_left', key)).toBe(94);
    const end = periodAt(Date.now(), 'month', 'Europe/Berlin').end / 1000;
    expect(total(all, 'webdata_etl_key_allowance_period_end', key)).toBe(end);
    expect(scraped).not.toContain(TEST_KEY);
  });
});
