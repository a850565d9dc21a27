// A real Prometheus server scraping a run's /metrics every second (issue 31 §2): what it stored, asked through its
// HTTP API once the run has ended, equals the run's summary and the simulator's own count.
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/run/summary.ts';
import { config, envFor, startCli } from '../cli-helpers.ts';
import { simulator } from '../helpers.ts';
import { freePort } from '../postgres/pg-cluster.ts';
import { workdir } from '../pipeline-helpers.ts';
import { type PrometheusServer, skipWithoutPrometheus, startPrometheus } from './prometheus.ts';

/**
 * Polls `read` until it returns `expected`, for at most `deadlineMs`, and resolves to what it read last: the caller
 * asserts equality, so that a figure that never arrives fails with what was there instead of timing out.
 */
async function settled<T>(read: () => Promise<T>, expected: T, deadlineMs = 30_000): Promise<T> {
  const until = Date.now() + deadlineMs;
  let last = await read();
  while (JSON.stringify(last) !== JSON.stringify(expected) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    last = await read();
  }
  return last;
}

describe.skipIf(skipWithoutPrometheus)('Prometheus scraping webdata-etl run --metrics-port', () => {
  it('stores the credits spent and the requests by status that the summary and the server count', async () => {
    await using sim = await simulator();
    // Two 503s (retried: requests, no credit) and a 429, so that requests come in three statuses.
    sim.inject({ fault: 'status', status: 503, times: 2 });
    sim.inject({ fault: 'status', status: 429, headers: { 'retry-after': '0' }, times: 1, after: 3 });
    using dir = workdir();
    const file = config(dir.dir, { retry: { attempts: 8, baseDelayMs: 1, maxDelayMs: 5 } }, { queries: ['a', 'b', 'c'], countries: ['us', 'gb'], maxPages: 3 });
    const port = await freePort();
    let prometheus: PrometheusServer | undefined;
    try {
      prometheus = await startPrometheus(`127.0.0.1:${port}`);
      // The process serves until a scrape after the run's end (Prometheus' next, within a second), then exits.
      const running = startCli(['run', file, '--metrics-port', String(port), '--metrics-linger', '600'], { cwd: dir.dir, env: envFor(sim.url) });
      const result = await running.done;
      expect(result.code, result.stderr).toBe(0);
      const summary = JSON.parse(result.stdout) as RunSummary;
      expect(summary.requests.byStatus).toMatchObject({ '200': summary.pages.fetched, '503': 2, '429': 1 });

      // The target is gone now: its series are stale, and an instant query would find nothing. The last value
      // stored within the last ten minutes is what it reported last.
      const server = prometheus;
      const credits = await settled(async () => (await server.query('sum(last_over_time(webdata_etl_credits_spent_total{job="webdata-etl"}[10m]))'))[0]?.value, summary.credits.spent);
      expect(credits).toBe(summary.credits.spent);
      expect(credits).toBe(sim.stats().credits.main?.debited);

      const expected = { '2xx': summary.requests.byStatus['200'], '429': 1, '5xx': 2 };
      const byStatus = await settled(async () => {
        const series = await server.query('sum by (webdata_etl_status) (last_over_time(webdata_etl_requests_total{job="webdata-etl"}[10m]))');
        return Object.fromEntries(series.map((one) => [one.labels.webdata_etl_status, one.value]).sort());
      }, expected);
      expect(byStatus).toEqual(expected);
    } finally {
      await prometheus?.stop();
    }
  });
});
