// The command line's /metrics (issue 31 §2): served from the run's own instruments in Prometheus' text format, valid
// by promtool's reading, equal at the end to the summary and to the simulator's own count, with neither the key nor a
// query's text; every wrong flag, variable or port said before a request is sent.
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunSummary } from '../../src/run/summary.ts';
import { cli, config, envFor, ROOT, startCli, startPipelineFile } from '../cli-helpers.ts';
import { simulator, TEST_KEY, until } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { checkMetrics, promtoolAvailable, samples, total } from './prometheus.ts';

/** Three 503s, retried: they are requests, and no credit. */
const FAULTS = { fault: 'status', status: 503, times: 3 } as const;
const RETRY = { retry: { attempts: 8, baseDelayMs: 1, maxDelayMs: 5 } };
/** Query texts a scraper must never see. */
const QUERIES = { queries: ['secret espresso query', 'secret kettle query'], countries: ['us', 'gb'], maxPages: 3 };

/** The URL the run says it serves its metrics at (its stderr so far). */
function servedAt(stderr: string): string {
  const url = /metrics: (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(stderr)?.[1];
  if (!url) throw new Error(`no metrics URL in:\n${stderr}`);
  return url;
}

async function scrape(url: string): Promise<string> {
  const answer = await fetch(url);
  expect(answer.status).toBe(200);
  expect(answer.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
  return answer.text();
}

/** The scrape's figures against the summary's: requests by status class, credits, pages, items. */
function expectFinalFigures(text: string, summary: RunSummary): void {
  const all = samples(text);
  const byStatus = Object.entries(summary.requests.byStatus);
  const ofClass = (test: (status: number) => boolean) => byStatus.filter(([status]) => test(Number(status))).reduce((sum, [, n]) => sum + n, 0);
  expect(total(all, 'webdata_etl_requests_total')).toBe(summary.requests.total);
  expect(total(all, 'webdata_etl_requests_total', { webdata_etl_status: '2xx' })).toBe(ofClass((status) => status >= 200 && status < 300));
  expect(total(all, 'webdata_etl_requests_total', { webdata_etl_status: '5xx' })).toBe(ofClass((status) => status >= 500));
  expect(total(all, 'webdata_etl_credits_spent_total')).toBe(summary.credits.spent);
  expect(total(all, 'webdata_etl_pages_committed_total')).toBe(summary.pages.fetched);
  expect(total(all, 'webdata_etl_items_written_total')).toBe(summary.items.written);
  expect(total(all, 'webdata_etl_series_ended_total')).toBe(summary.series.total);
}

function expectNothingSecret(text: string): void {
  expect(text).not.toContain(TEST_KEY);
  expect(text).not.toContain('secret');
  expect(text).not.toContain('espresso');
}

describe.skipIf(!promtoolAvailable && process.env.CI !== 'true')('webdata-etl run --metrics-port', () => {
  it('serves /metrics while the run runs and until a scrape after its end; promtool accepts it; the final figures are the summary\'s and the server\'s', async () => {
    await using sim = await simulator();
    sim.inject(FAULTS);
    using dir = workdir();
    const file = config(dir.dir, RETRY, QUERIES);
    // The first requests are held unanswered: the run is in flight, whatever the machine's speed, when it is scraped.
    const gate = sim.park();
    const running = startCli(['run', file, '--metrics-port', '0', '--metrics-linger', '600'], { cwd: dir.dir, env: envFor(sim.url) });
    await running.printed('metrics: http://');
    const url = servedAt(running.output().stderr);
    await running.whileRunning(gate.reached());

    const during = await running.whileRunning(scrape(url));
    expect(checkMetrics(during)).toEqual({ status: 0, said: '' });
    // Held requests are not answered yet: nothing is spent, and they are in flight.
    expect(total(samples(during), 'webdata_etl_credits_spent_total')).toBe(0);
    expect(total(samples(during), 'webdata_etl_requests_in_flight')).toBeGreaterThan(0);
    gate.release();

    // The run ended and its summary is out, and the process waits (600 s) for a scrape of the final figures.
    await running.printed('metrics: waiting up to 600s for a scrape of the final figures');
    await running.whileRunning(until(() => running.output().stdout.trimEnd().endsWith('}')));
    const summary = JSON.parse(running.output().stdout) as RunSummary;
    const after = await running.whileRunning(scrape(url));
    // That scrape ends the wait: the process exits with the run's own code.
    const result = await running.done;
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(summary);

    expect(checkMetrics(after)).toEqual({ status: 0, said: '' });
    expect(summary.requests.byStatus['200']).toBeGreaterThan(0);
    expect(summary.requests.byStatus['503']).toBe(3);
    expectFinalFigures(after, summary);
    expect(total(samples(after), 'webdata_etl_credits_spent_total')).toBe(sim.stats().credits.main?.debited);
    expect(total(samples(after), 'webdata_etl_requests_in_flight')).toBe(0);
    // The resource: service.name webdata-etl (no OTEL_SERVICE_NAME here), as target_info.
    expect(samples(after).find((sample) => sample.name === 'target_info')?.labels.service_name).toBe('webdata-etl');
    expectNothingSecret(during + after);
    // docs/observability.md names every metric as Prometheus stores it ("Names in Prometheus").
    const doc = readFileSync(join(ROOT, 'docs/observability.md'), 'utf8');
    const families = new Set(samples(during + after).map((sample) => sample.name.replace(/_(bucket|sum|count)$/, '')).filter((name) => name.startsWith('webdata_etl_')));
    expect(families.size).toBeGreaterThan(10);
    for (const name of families) expect(doc, `docs/observability.md names ${name}`).toContain(`\`${name}`);
  });


  it('the paced rate is there from the first scrape, at the configured rate, before any 429 made the run adapt', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { ...RETRY, rate: { requestsPerSecond: 7 } }, QUERIES);
    // The first requests are held unanswered: the scrape is of a run at its start, whatever the machine's speed.
    const gate = sim.park();
    const running = startCli(['run', file, '--metrics-port', '0', '--metrics-linger', '0'], { cwd: dir.dir, env: envFor(sim.url) });
    await running.printed('metrics: http://');
    const url = servedAt(running.output().stderr);
    await running.whileRunning(gate.reached());
    const first = samples(await running.whileRunning(scrape(url)));
    gate.release();
    expect(first.filter((sample) => sample.name === 'webdata_etl_rate_paced').map((sample) => sample.value)).toEqual([7]);
    expect(total(first, 'webdata_etl_requests_total', { webdata_etl_status: '429' })).toBe(0);
    const result = await running.done;
    expect(result.code).toBe(0);
    expect((JSON.parse(result.stdout) as RunSummary).requests.byStatus['429']).toBeUndefined();
  });
  it('the wait for a last scrape: Ctrl-C ends it, its time ends it, 0 skips it; the exit code and the summary are the run\'s; OTEL_METRICS_EXPORTER=prometheus serves too', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir);
    const env = envFor(sim.url);
    const waiting = startCli(['run', file, '--metrics-port', '0', '--metrics-linger', '600'], { cwd: dir.dir, env });
    await waiting.printed('metrics: waiting up to 600s');
    waiting.child.kill('SIGINT');
    const interrupted = await waiting.done;
    expect(interrupted.code).toBe(0);
    expect(JSON.parse(interrupted.stdout)).toMatchObject({ status: 'completed' });

    // No scrape comes: the wait ends on its own (a test that would time out if it did not).
    const timed = await cli(['run', file, '--fresh', '--metrics-port', '0', '--metrics-linger', '0.5'], { cwd: dir.dir, env });
    expect(timed.code).toBe(0);
    expect(timed.stderr).toContain('metrics: waiting up to 0.5s');
    expect(JSON.parse(timed.stdout)).toMatchObject({ status: 'completed' });

    const none = await cli(['run', file, '--fresh', '--metrics-port', '0', '--metrics-linger', '0'], { cwd: dir.dir, env });
    expect(none.code).toBe(0);
    expect(none.stderr).toMatch(/^metrics: http:\/\/127\.0\.0\.1:\d+\/metrics$/m);
    expect(none.stderr).not.toContain('waiting');
    // OpenTelemetry's own way of asking for the endpoint, as its SDKs read it (loopback here too).
    const otel = await cli(['run', file, '--fresh', '--metrics-linger', '0'], { cwd: dir.dir, env: { ...env, OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_PORT: '0' } });
    expect(otel.code).toBe(0);
    expect(otel.stderr).toMatch(/^metrics: http:\/\/127\.0\.0\.1:\d+\/metrics$/m);
    // --quiet: not a word on stderr, the endpoint's URL included.
    const quiet = await cli(['run', file, '--fresh', '--quiet', '--metrics-port', '0', '--metrics-linger', '0'], { cwd: dir.dir, env });
    expect(quiet).toMatchObject({ code: 0, stderr: '' });
  });

  it('node <pipeline.ts> --metrics-port too, with the URL as a JSON event under --log-format json', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const running = startPipelineFile(join(ROOT, 'pipelines/rank-tracking.ts'), ['--metrics-port', '0', '--metrics-linger', '600', '--log-format', 'json'], {
      cwd: dir.dir,
      env: envFor(sim.url),
    });
    await running.printed('"event":"metrics"');
    const event = running
      .output()
      .stderr.split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { event: string; url?: string })
      .find((line) => line.event === 'metrics');
    expect(event?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    await running.printed('waiting up to 600s');
    await running.whileRunning(until(() => running.output().stdout.trimEnd().endsWith('}')));
    const after = await running.whileRunning(scrape(event?.url ?? ''));
    const result = await running.done;
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout) as RunSummary;
    expect(summary.pipeline).toBe('rank-tracking');
    expectFinalFigures(after, summary);
    expect(total(samples(after), 'webdata_etl_credits_spent_total')).toBe(sim.stats().credits.main?.debited);
    expect(checkMetrics(after).status).toBe(0);
  });
});

describe('the metrics flags and variables, checked before anything is sent', () => {
  it('a wrong port, host or linger, a port in use, an unknown OTLP protocol or a missing exporter: exit 2 naming it, no request', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir);
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const takenPort = (taken.address() as { port: number }).port;
    try {
      const cases: { args: string[]; env?: Record<string, string>; says: RegExp }[] = [
        { args: ['--metrics-port', '70000'], says: /--metrics-port must be a port number, 0 to 65535 .*; got "70000"/ },
        { args: ['--metrics-port', 'ninety'], says: /--metrics-port must be a port number, 0 to 65535 .*; got "ninety"/ },
        { args: ['--metrics-port=-1'], says: /--metrics-port must be a port number/ },
        { args: [], env: { WEBDATA_METRICS_PORT: '99999' }, says: /WEBDATA_METRICS_PORT must be a port number, 0 to 65535 .*; got "99999"/ },
        { args: ['--metrics-port', '0', '--metrics-host', 'bad host!'], says: /--metrics-host must be an IP address or a host name .*; got "bad host!"/ },
        { args: ['--metrics-port', '0'], env: { WEBDATA_METRICS_HOST: 'under_score' }, says: /WEBDATA_METRICS_HOST must be an IP address or a host name/ },
        { args: ['--metrics-port', '0', '--metrics-linger', 'soon'], says: /--metrics-linger must be a number of seconds, 0 to 86400 .*; got "soon"/ },
        { args: ['--metrics-host', '0.0.0.0'], says: /--metrics-host needs --metrics-port \(or WEBDATA_METRICS_PORT\)/ },
        // TEST-NET-3: no machine's own address. Binding to it is refused locally; nothing is sent anywhere.
        { args: ['--metrics-port', '0', '--metrics-host', '203.0.113.7'], says: /--metrics-host 203\.0\.113\.7: not an address of this machine/ },
        { args: ['--metrics-port', String(takenPort)], says: new RegExp(`--metrics-port ${takenPort}: 127\\.0\\.0\\.1:${takenPort} is already in use by another process`) },
        { args: [], env: { WEBDATA_METRICS_PORT: String(takenPort) }, says: new RegExp(`WEBDATA_METRICS_PORT ${takenPort}: 127\\.0\\.0\\.1:${takenPort} is already in use`) },
        {
          args: [],
          env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/xml' },
          says: /OTEL_EXPORTER_OTLP_PROTOCOL must be one of http\/protobuf, http\/json, grpc; got "http\/xml"/,
        },
        // The default protocol's exporter is not among this repository's packages: said by name, with the ways out.
        {
          args: [],
          env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' },
          says: /the default protocol \(http\/protobuf\)\) needs @opentelemetry\/exporter-metrics-otlp-proto, which is not installed: npm install @opentelemetry\/exporter-metrics-otlp-proto .*OTEL_METRICS_EXPORTER=none/,
        },
        { args: [], env: { OTEL_METRICS_EXPORTER: 'otlp', OTEL_METRIC_EXPORT_INTERVAL: '1m' }, says: /OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds above 0; got "1m"/ },
      ];
      // Side by side: each is its own process, and none may send a request.
      const results = await Promise.all(cases.map(({ args, env }) => cli(['run', file, ...args], { cwd: dir.dir, env: { ...envFor(sim.url), ...env } })));
      for (const [i, result] of results.entries()) {
        const { args, env, says } = cases[i] as (typeof cases)[number];
        expect({ args, env, code: result.code, stderr: result.stderr }).toMatchObject({ code: 2, stderr: expect.stringMatching(says) });
      }
      expect(sim.stats().requests).toBe(0);
    } finally {
      taken.close();
    }
  });
});
