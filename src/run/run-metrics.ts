import type { Attributes, BatchObservableResult, Meter, Observable } from '@opentelemetry/api';
import type { FleetFigures } from '../host/run-host.ts';
import type { SchedulerStats } from '../schedule/types.ts';
import { VERSION } from '../version.ts';
import { registeredOpenTelemetry } from './open-telemetry.ts';
import type { RunEvent } from './run-types.ts';

/** What the run's gauges read when a reader collects: the scheduler, the pages between network and commit, the fleet. */
export interface RunGauges {
  stats(): SchedulerStats;
  backlog(): { uncommitted: number; heldBack: number };
  /** A distributed run's workers and series, asked from its database. */
  fleet?: (() => Promise<FleetFigures>) | undefined;
}

/**
 * Per pipeline, what stops each of its runs' gauges in this process, and whether that run has ended. A run's gauges
 * outlive it, at its final figures, until the same pipeline runs again: an exporter that collects after the end (the
 * command line's last scrape) reads where the run ended, and a long-lived process reports one set per pipeline, not
 * one per run it ever ran.
 */
const endedRuns = new Map<string, Map<() => void, boolean>>();

/** What the gauges report at one collection. */
interface GaugeFigures {
  stats: SchedulerStats;
  backlog: { uncommitted: number; heldBack: number };
  active: number;
  fleet: FleetFigures | undefined;
}

/**
 * Bucket bounds for durations in seconds: OpenTelemetry's for HTTP client durations. The SDK's default bounds (0 to
 * 10,000) are made for milliseconds and would put every request in the first two buckets.
 */
const SECONDS = { explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10] };

/** The longest a collection waits for the fleet's figures: a scrape must not hang on a database outage. */
const FLEET_WAIT_MS = 2000;

/** The run's metrics: `record` takes its events (counters, histograms), `observe` its gauges until the run ends. */
export interface RunMetrics {
  record(event: RunEvent): void;
  /** Starts reporting the run's gauges; returns what freezes them at the run's final figures (`lastRun` says why). */
  observe(gauges: RunGauges): () => void;
}

/**
 * A run's OpenTelemetry metrics (docs/observability.md), taken from the same events as its progress and summary, so
 * that they agree with them, and gauges read from the scheduler when a reader collects. `@opentelemetry/api` does
 * nothing until an application registers an SDK: then these reach whatever it exports to. Attributes: the pipeline,
 * the endpoint, the status, a distributed run's worker, a pool's key label — never the key, never a query's text.
 */
export function runMetrics(pipeline: string): RunMetrics {
  // Taken per run: an SDK registered after the package was loaded, before the run, is the one they report to. None
  // registered: the API's meter would be its no-op one, and the API is not loaded for it.
  const meter = registeredOpenTelemetry()?.metrics.getMeter('webdata-etl', VERSION);
  if (meter === undefined) return { record() {}, observe: () => () => undefined };
  const requests = meter.createCounter('webdata_etl.requests', { description: 'Requests answered (or failed without an answer), by status class', unit: '{request}' });
  const duration = meter.createHistogram('webdata_etl.request.duration', { description: 'Time from sending a request to its answer', unit: 's', advice: SECONDS });
  const credits = meter.createCounter('webdata_etl.credits.spent', { description: 'Credits counted as spent, the uncertain ones included', unit: '{credit}' });
  const uncertain = meter.createCounter('webdata_etl.credits.uncertain', { description: 'Credits counted as spent without certainty (a timeout or reset after sending)', unit: '{credit}' });
  const retries = meter.createCounter('webdata_etl.retries', { description: 'Attempts sent again, by reason', unit: '{request}' });
  const pauses = meter.createCounter('webdata_etl.pauses', { description: 'Pauses of every request for the rate limit, by reason', unit: '{pause}' });
  const paused = meter.createCounter('webdata_etl.pause.duration', { description: 'Time the run paused for the rate limit', unit: 's' });
  const pages = meter.createCounter('webdata_etl.pages.committed', { description: 'Pages committed', unit: '{page}' });
  const commits = meter.createHistogram('webdata_etl.commit.duration', { description: 'Time from a page leaving the stages to its commit being durable', unit: 's', advice: SECONDS });
  const written = meter.createCounter('webdata_etl.items.written', { description: 'Items committed to the sinks', unit: '{item}' });
  const duplicates = meter.createCounter('webdata_etl.items.duplicates', { description: 'Items dropped as duplicates', unit: '{item}' });
  const series = meter.createCounter('webdata_etl.series.ended', { description: 'Series that ended in this invocation, by reason', unit: '{series}' });
  const rate = meter.createGauge('webdata_etl.rate.paced', { description: 'Requests a second the run paces itself to', unit: '{request}/s' });
  // A pool's keys, each by its label (never the key, never its fingerprint): the series above stay the run's totals.
  const keyRequests = meter.createCounter('webdata_etl.key.requests', { description: 'A pool\'s key: requests answered (or failed without an answer), by status class', unit: '{request}' });
  const keyCredits = meter.createCounter('webdata_etl.key.credits', { description: 'A pool\'s key: credits counted as spent, the uncertain ones included', unit: '{credit}' });
  let base: Attributes = { 'webdata_etl.pipeline': pipeline };
  // Series this process is paging: a request sent, no end yet.
  const active = new Set<string>();
  const record = (event: RunEvent): void => {
    switch (event.type) {
      case 'start':
        // A distributed run's worker: every point says which one it came from.
        if (event.worker) base = { ...base, 'webdata_etl.worker.id': event.worker.id };
        return;
      case 'request':
        active.add(event.series);
        return;
      case 'response': {
        const at = { ...base, 'webdata_etl.endpoint': event.path };
        requests.add(1, { ...at, 'webdata_etl.status': statusClass(event.status) });
        duration.record(event.latencyMs / 1000, at);
        if (event.credits > 0) credits.add(event.credits, at);
        if (event.uncertain && event.credits > 0) uncertain.add(event.credits, at);
        // Only a pool's answers name their key (docs/observability.md#a-pool-of-keys).
        if (event.key === undefined) return;
        const key = { ...base, 'webdata_etl.key': event.key };
        keyRequests.add(1, { ...key, 'webdata_etl.status': statusClass(event.status) });
        if (event.credits > 0) keyCredits.add(event.credits, key);
        return;
      }
      case 'retry':
        return retries.add(1, { ...base, 'webdata_etl.endpoint': event.path, 'webdata_etl.reason': event.reason });
      case 'pause': {
        const at = { ...base, 'webdata_etl.reason': event.reason };
        pauses.add(1, at);
        return paused.add(event.ms / 1000, at);
      }
      case 'adapt':
        return rate.record(event.rate, base);
      case 'series':
        active.delete(event.series);
        return series.add(1, { ...base, 'webdata_etl.reason': event.reason });
      case 'page':
        pages.add(1, base);
        commits.record(event.commitMs / 1000, base);
        written.add(event.items, base);
        if (event.duplicates > 0) duplicates.add(event.duplicates, base);
        return;
      default:
        return;
    }
  };
  const observe = (gauges: RunGauges): (() => void) => {
    // The rate the run starts paced to (the configured one, or where a shared pacer stands), so that the gauge is in
    // every scrape from the first: `adapt` events move it from there, and a run that never meets a 429 has none.
    rate.record(gauges.stats().rate, base);
    const observed = runGauges(meter);
    let final: GaugeFigures | undefined;
    const callback = async (result: BatchObservableResult) => {
      const figures = final ?? { stats: gauges.stats(), backlog: gauges.backlog(), active: active.size, fleet: gauges.fleet ? await fleetWithin(gauges.fleet) : undefined };
      reportGauges(result, observed, figures, base);
    };
    const all = Object.values(observed);
    // The pipeline's runs in this process that ended stop reporting: their final figures stood until now. Runs still
    // going (workers of one run in one process) go on.
    const runs = endedRuns.get(pipeline) ?? new Map<() => void, boolean>();
    endedRuns.set(pipeline, runs);
    for (const [stopEnded, ended] of runs) {
      if (!ended) continue;
      stopEnded();
      runs.delete(stopEnded);
    }
    meter.addBatchObservableCallback(callback, all);
    const stop = () => meter.removeBatchObservableCallback(callback, all);
    runs.set(stop, false);
    // Ended, the gauges hold the run's final figures (a scrape after the end reads them, not the last mid-run ones).
    return () => {
      final = { stats: gauges.stats(), backlog: { uncommitted: 0, heldBack: 0 }, active: 0, fleet: undefined };
      runs.set(stop, true);
    };
  };
  return { record, observe };
}

/** The gauges a run reports while it runs. */
function runGauges(meter: Meter) {
  const gauge = (name: string, description: string, unit: string) => meter.createObservableGauge(name, { description, unit });
  return {
    budget: gauge('webdata_etl.budget', 'The most credits the run may spend in all (absent: no budget)', '{credit}'),
    spent: gauge('webdata_etl.budget.spent', 'Credits counted against the budget: every invocation and worker of the run', '{credit}'),
    reserved: gauge('webdata_etl.credits.reserved', 'Credits held by requests in flight', '{credit}'),
    inFlight: gauge('webdata_etl.requests.in_flight', 'Requests sent and not yet answered', '{request}'),
    learned: gauge('webdata_etl.rate.limit', 'The server\'s limit as learned from its 429s (absent until one taught it)', '{request}/s'),
    uncommitted: gauge('webdata_etl.pages.uncommitted', 'Pages paid for and not yet committed', '{page}'),
    heldBack: gauge('webdata_etl.pages.held_back', 'Requests held back until the stages and commits catch up (backpressure)', '{request}'),
    active: gauge('webdata_etl.series.active', 'Series this process is paging', '{series}'),
    workers: gauge('webdata_etl.run.workers', 'A distributed run\'s workers at work', '{worker}'),
    runSeries: gauge('webdata_etl.run.series', 'A distributed run\'s series by state: waiting (the queue\'s depth), active, ended', '{series}'),
    keyRate: gauge('webdata_etl.key.rate', 'A pool\'s key: requests a second it is paced to', '{request}/s'),
    keyLimit: gauge('webdata_etl.key.rate.limit', 'A pool\'s key: its limit as learned from its own answers (absent until one taught it)', '{request}/s'),
    keyRetired: gauge('webdata_etl.key.retired', 'A pool\'s key: 1 once retired (a 401 for the run, a 402 or 403 for an endpoint), else 0', '{key}'),
    allowance: gauge('webdata_etl.key.allowance', 'A key\'s allowance: the credits it may spend in its period (absent: none)', '{credit}'),
    allowanceLeft: gauge('webdata_etl.key.allowance.left', 'A key\'s allowance: credits not yet spent in its period, every pipeline\'s spend counted, as last heard from the ledger', '{credit}'),
    allowanceEnds: gauge('webdata_etl.key.allowance.period_end', 'A key\'s allowance: when its period ends (Unix time, seconds)', 's'),
  } satisfies Record<string, Observable>;
}

function reportGauges(
  result: BatchObservableResult,
  gauges: ReturnType<typeof runGauges>,
  figures: GaugeFigures,
  base: Attributes,
): void {
  const { stats, backlog, fleet } = figures;
  if (stats.credits.budget !== null) result.observe(gauges.budget, stats.credits.budget, base);
  result.observe(gauges.spent, stats.credits.spent, base);
  result.observe(gauges.reserved, stats.credits.reserved, base);
  result.observe(gauges.inFlight, stats.requests.inFlight, base);
  if (stats.learnedLimit !== null) result.observe(gauges.learned, stats.learnedLimit, base);
  result.observe(gauges.uncommitted, backlog.uncommitted, base);
  result.observe(gauges.heldBack, backlog.heldBack, base);
  result.observe(gauges.active, figures.active, base);
  // A pool's keys (one key: the run's figures are its own).
  if (stats.keys.length > 1) {
    for (const key of stats.keys) {
      const at = { ...base, 'webdata_etl.key': key.label };
      // A key retired for the run sends nothing more; an unpaced one has no rate to report.
      if (key.retired?.path === null) result.observe(gauges.keyRate, 0, at);
      else if (Number.isFinite(key.rate)) result.observe(gauges.keyRate, key.rate, at);
      if (key.learnedLimit !== null) result.observe(gauges.keyLimit, key.learnedLimit, at);
      result.observe(gauges.keyRetired, key.retired ? 1 : 0, at);
    }
  }
  // Every key with an allowance, one key included: what binds it is across runs, not this run's.
  for (const key of stats.keys) {
    if (key.allowance === null) continue;
    const at = { ...base, 'webdata_etl.key': key.label };
    result.observe(gauges.allowance, key.allowance.credits, at);
    result.observe(gauges.allowanceLeft, key.allowance.left, at);
    result.observe(gauges.allowanceEnds, Math.round(key.allowance.endsAt / 1000), at);
  }
  if (!fleet) return;
  result.observe(gauges.workers, fleet.workers, base);
  for (const [state, count] of Object.entries(fleet.series)) result.observe(gauges.runSeries, count, { ...base, 'webdata_etl.state': state });
}

/** The fleet's figures, or none if the database does not answer within FLEET_WAIT_MS (that collection goes without). */
async function fleetWithin(fleet: () => Promise<FleetFigures>): Promise<FleetFigures | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), FLEET_WAIT_MS);
    timer.unref();
  });
  try {
    return await Promise.race([fleet(), late]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** A status as a class few enough to chart: 2xx, 5xx, each 4xx by its code (429, 402, 403 mean different things), network. */
function statusClass(status: number | string): string {
  if (typeof status !== 'number') return 'network';
  if (status >= 200 && status < 300) return '2xx';
  if (status >= 500) return '5xx';
  return String(status);
}
