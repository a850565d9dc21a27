// Key pools (issue 40's aims), measured as a user runs them: `webdata-etl run pipeline.json` spawned with the keys in
// WEBDATA_API_KEYS, timed from spawn to exit, behind a real nginx with one `limit_req` zone per key (keyed by the
// `x-api-key` header) in front of an unlimited simulator. nginx's access log, by key label, is the witness: the
// server's own count of what each key sent and what it was answered, independent of the run's summary.
// (q) three keys at 8, 4 and 2 r/s the run is not told, then the same pipeline again on the same state; (r) a key
// revoked mid-run; (s) one key, no pool, against the same harness (to compare with the code before pools).
// Alone: `node scripts/with-node.mjs test/bench/key-pools.ts [pool|revoked|one-key|timeline] [root …]` (root: a
// checkout whose `src/cli/main.ts` is run, this one by default; several roots are run in turn, for a before-and-after;
// `timeline`: each key's rate changes, through `run()`).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { startSimulator } from '../../src/simulator/index.ts';
import { type LogEntry, type NginxKey, startNginx } from './nginx.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const FIXTURE = resolve(import.meta.dirname, '../fixtures/run-pipeline.ts');
const LATENCY_MS = 200;
const BURST = 2;
/** The pool: three keys behind zones of 8, 4 and 2 r/s, the pipeline configured at 24 r/s per key. */
export const POOL = { limits: { k8: 8, k4: 4, k2: 2 }, configuredPerKey: 24, concurrency: 4, series: 36, pagesPerSeries: 10 } as const;
const SUMMED = Object.values(POOL.limits).reduce((sum, rate) => sum + rate, 0);

const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
const log = (line: string) => process.stderr.write(`${line}\n`);
const load = () => round(loadavg()[0] ?? 0, 2);

interface Invocation {
  code: number | null;
  /** Spawn to exit, as a user waits (start-up and tail included). */
  wallSeconds: number;
  /** The run's summary (stdout), or undefined when it printed none. */
  summary: Record<string, unknown> | undefined;
  stderrTail: string;
  /** The window of nginx's log this invocation owns (seconds since the epoch). */
  from: number;
  to: number;
  loadAverage: { atStart: number; atEnd: number };
}

/** `webdata-etl run <file>` from `root`, with none of our variables but `env`. */
function runCli(root: string, dir: string, file: string, env: Record<string, string>): Promise<Invocation> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('WEBDATA_')));
  const from = Date.now() / 1000;
  const started = performance.now();
  const atStart = load();
  const child = spawn(process.execPath, ['--conditions=webdata-etl:source', join(root, 'src/cli/main.ts'), 'run', file], {
    cwd: dir,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (process.env.BENCH_DEBUG) process.stderr.write(chunk);
  });
  return new Promise((resolveRun, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      let summary: Record<string, unknown> | undefined;
      try {
        summary = JSON.parse(stdout) as Record<string, unknown>;
      } catch {
        summary = undefined;
      }
      resolveRun({ code, wallSeconds: round((performance.now() - started) / 1000, 2), summary, stderrTail: stderr.slice(-400), from, to: Date.now() / 1000, loadAverage: { atStart, atEnd: load() } });
    });
  });
}

/** A pipeline file: the planned pages as `series` queries of `pagesPerSeries` pages each, SQLite out and state. */
function pipelineFile(dir: string, name: string, plan: { series: number; pagesPerSeries: number; requestsPerSecond: number; concurrency: number }): string {
  const file = join(dir, `${name}.json`);
  const queries = Array.from({ length: plan.series }, (_, i) => `${name} query ${i}`);
  writeFileSync(
    file,
    JSON.stringify({
      name,
      search: { queries, countries: ['us'], maxPages: plan.pagesPerSeries },
      sinks: [{ type: 'sqlite', path: 'out/results.sqlite' }],
      rate: { requestsPerSecond: plan.requestsPerSecond, concurrency: plan.concurrency },
    }),
  );
  return file;
}

/** Keys made for one benchmark, so nothing in a report could be mistaken for a credential (and no key is printed). */
const benchKeys = (limits: Record<string, number>): NginxKey[] => Object.entries(limits).map(([label, ratePerSecond]) => ({ label, key: `bench_${label}_${randomBytes(10).toString('hex')}`, ratePerSecond }));

/**
 * What nginx logged in [from, to]: requests and statuses, accepted per second over the span of the log (learning and
 * tail included: the short run as a user has it), and the steady state (the seconds from the 5th to the last 2, which
 * leave out the learning and the tail); the same by key.
 */
function witness(all: readonly LogEntry[], from: number, to: number, limits: Record<string, number>) {
  const entries = all.filter((entry) => entry.at >= from && entry.at <= to + 1);
  const summed = Object.values(limits).reduce((sum, rate) => sum + rate, 0);
  const first = Math.min(...entries.map((entry) => entry.at));
  const last = Math.max(...entries.map((entry) => entry.at));
  const span = Math.max(last - first, 0.001);
  const byStatus = (list: readonly LogEntry[]) => {
    const counts: Record<string, number> = {};
    for (const { status } of list) counts[status] = (counts[status] ?? 0) + 1;
    return counts;
  };
  const accepted = (list: readonly LogEntry[]) => list.filter((entry) => entry.status === '200').length;
  const seconds = Math.floor(span) + 1;
  const perSecond = (list: readonly LogEntry[]) => {
    const counts = Array.from({ length: seconds }, () => 0);
    for (const entry of list) if (entry.status === '200') counts[Math.floor(entry.at - first)]! += 1;
    return counts;
  };
  const steady = (counts: number[]) => {
    const middle = counts.slice(5, Math.max(counts.length - 2, 5));
    return middle.length === 0 ? null : middle.reduce((sum, n) => sum + n, 0) / middle.length;
  };
  const keys = Object.fromEntries(
    Object.entries(limits).map(([label, limit]) => {
      const mine = entries.filter((entry) => entry.label === label);
      const rate = accepted(mine) / span;
      const steadyRate = steady(perSecond(mine));
      return [label, { limit, requests: mine.length, byStatus: byStatus(mine), acceptedPerSecond: round(rate, 2), overOwnLimit: round(rate / limit), steadyOverOwnLimit: steadyRate === null ? null : round(steadyRate / limit) }];
    }),
  );
  const whole = perSecond(entries);
  const steadyRate = steady(whole);
  const counts = byStatus(entries);
  return {
    requests: entries.length,
    byStatus: counts,
    share429: round((counts['429'] ?? 0) / Math.max(entries.length, 1), 4),
    spanSeconds: round(span, 2),
    // Spawn to the first request nginx logged (it logs a request when it ends: its answer's latency included).
    firstAnswerAfterSeconds: round(first - from, 2),
    achievedOverSummedLimits: round(accepted(entries) / span / summed),
    steadyOverSummedLimits: steadyRate === null ? null : round(steadyRate / summed),
    acceptedPerSecond: whole,
    keys,
  };
}

/** How the invocation ended; `wallOverLimits`: the planned pages over spawn to exit (start-up included) against `limits` r/s. */
const outcome = (run: Invocation, pages: number, limits: number) => ({
  exitCode: run.code,
  status: run.summary?.status,
  pagesFetched: (run.summary?.pages as { fetched?: number } | undefined)?.fetched ?? null,
  wallSeconds: run.wallSeconds,
  wallOverLimits: round(pages / run.wallSeconds / limits),
  plannedPages: pages,
  // The summary's own figures by key, where the run has them (issue 40's visibility item).
  summaryKeys: run.summary?.keys ?? null,
  loadAverage: run.loadAverage,
  ...(run.code === 0 ? {} : { stderrTail: run.stderrTail }),
});

/** The three keys behind nginx's zones over the simulator, and a directory for the pipeline: closed together. */
async function startPool(prefix: string) {
  const keys = benchKeys(POOL.limits);
  const sim = await startSimulator({ latencyMs: LATENCY_MS, resultsPerQuery: 1000, keys: keys.map(({ key, label }) => ({ key, name: label })) });
  try {
    const nginx = await startNginx({ upstreamPort: sim.port, ratePerSecond: SUMMED, burst: BURST, keys });
    const dir = mkdtempSync(join(tmpdir(), `webdata-bench-${prefix}-`));
    return {
      sim,
      nginx,
      dir,
      env: { WEBDATA_BASE_URL: nginx.url, WEBDATA_API_KEYS: keys.map(({ label, key }) => `${label}=${key}`).join('\n') },
      async [Symbol.asyncDispose]() {
        await nginx.close();
        await sim.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await sim.close();
    throw error;
  }
}

/** (q) The pool at limits it does not know, then the same pipeline again on the same state database. */
export async function scenarioKeyPool(root = ROOT) {
  const pages = POOL.series * POOL.pagesPerSeries;
  await using pool = await startPool('pool');
  const file = pipelineFile(pool.dir, 'bench-pool', { ...POOL, requestsPerSecond: POOL.configuredPerKey });
  const invoke = async (which: 'first' | 'again') => {
    log(`(q) key pool, ${which} run: 3 keys behind nginx zones of 8, 4, 2 r/s (burst ${BURST}), configured ${POOL.configuredPerKey} r/s per key, ${pages} pages`);
    const run = await runCli(root, pool.dir, file, pool.env);
    // What the state store remembers of the keys' limits after the run (highest first: k8's, k4's, k2's).
    return { run: which, ...outcome(run, pages, SUMMED), nginx: witness(await pool.nginx.entries(), run.from, run.to, POOL.limits), remembered: rememberedLimits(join(pool.dir, 'out/results.sqlite')) };
  };
  const first = await invoke('first');
  // The same command again, in the same directory: a new run on the same state database.
  const again = await invoke('again');
  return { limiter: 'nginx limit_req per key (leaky bucket, nodelay), keyed by x-api-key', limits: POOL.limits, summedLimits: SUMMED, burst: BURST, latencyMs: LATENCY_MS, configuredPerKey: POOL.configuredPerKey, concurrencyPerKey: POOL.concurrency, plannedPages: pages, first, again };
}

/** (r) The same pool, the 8 r/s key revoked by the API once `afterRequests` of its requests were paid. */
export async function scenarioKeyRevoked(root = ROOT, afterRequests = 60) {
  const pages = POOL.series * POOL.pagesPerSeries;
  const revoked = 'k8';
  await using pool = await startPool('revoked');
  let revokedAt: number | null = null;
  // The run cannot tell when: the API refuses the key from its next request on, as a key revoked on the provider's side.
  const watch = setInterval(() => {
    if (revokedAt === null && (pool.sim.stats().credits[revoked]?.debited ?? 0) >= afterRequests) {
      pool.sim.updateKey(revoked, { status: 'revoked' });
      revokedAt = Date.now() / 1000;
    }
  }, 10);
  try {
    const file = pipelineFile(pool.dir, 'bench-revoked', { ...POOL, requestsPerSecond: POOL.configuredPerKey });
    log(`(r) key pool, ${revoked} revoked after ${afterRequests} paid requests: ${pages} pages`);
    const run = await runCli(root, pool.dir, file, pool.env);
    clearInterval(watch);
    const all = await pool.nginx.entries();
    const seen = witness(all, run.from, run.to, POOL.limits);
    const rest = Object.fromEntries(Object.entries(POOL.limits).filter(([label]) => label !== revoked));
    const after = revokedAt === null ? null : witness(all, revokedAt, run.to, rest);
    return {
      revokedKey: revoked,
      afterPaidRequests: afterRequests,
      revokedAtSecond: revokedAt === null ? null : round(revokedAt - run.from, 2),
      ...outcome(run, pages, SUMMED),
      // The requests the revocation cost: the revoked key's 401s (each is sent again with another key).
      lost401: seen.keys[revoked]?.byStatus['401'] ?? 0,
      // The others after the revocation, against their own summed limits (6 r/s).
      afterRevocation: after === null ? null : { overRemainingLimits: after.achievedOverSummedLimits, steadyOverRemainingLimits: after.steadyOverSummedLimits, share429: after.share429, byStatus: after.byStatus, seconds: after.spanSeconds },
      nginx: seen,
    };
  } finally {
    clearInterval(watch);
  }
}

/** (s) One key (WEBDATA_API_KEY, no pool) behind nginx at 10 r/s it is not told, configured at 30, 240 pages: (j)'s one process, from the command line. */
export async function scenarioOneKey(root = ROOT) {
  const plan = { series: 48, pagesPerSeries: 5, requestsPerSecond: 30, concurrency: 4 };
  const limit = 10;
  const pages = plan.series * plan.pagesPerSeries;
  const [key] = benchKeys({ main: limit });
  if (!key) throw new Error('no key');
  const sim = await startSimulator({ latencyMs: LATENCY_MS, resultsPerQuery: 1000, keys: [{ key: key.key, name: 'main' }] });
  // One zone for the server, as (a), (b) and (j) have it: the key is the only one sending.
  const nginx = await startNginx({ upstreamPort: sim.port, ratePerSecond: limit, burst: BURST });
  const dir = mkdtempSync(join(tmpdir(), 'webdata-bench-one-key-'));
  try {
    const file = pipelineFile(dir, 'bench-one-key', plan);
    log(`(s) one key behind nginx at ${limit} r/s, configured ${plan.requestsPerSecond}, ${pages} pages (${root === ROOT ? 'this checkout' : root})`);
    const run = await runCli(root, dir, file, { WEBDATA_BASE_URL: nginx.url, WEBDATA_API_KEY: key.key });
    const seen = witness(await nginx.entries(), run.from, run.to, { '-': limit });
    const { summaryKeys: _none, ...result } = outcome(run, pages, limit);
    const { keys: _byKey, ...whole } = seen;
    return { root: root === ROOT ? 'this checkout' : root, serverLimit: limit, ...result, nginx: whole };
  } finally {
    await nginx.close();
    await sim.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * (q) through `run()` (the test fixture) instead of the command line, which prints no rate changes: each key's `adapt`
 * events (seconds since spawn, rate, concurrency, why) and the seconds of its 429s in nginx's log, to see where a key's
 * throughput went; then the same pipeline again on the same state, with what the first left in the state store (each
 * key's remembered rate and the lowest that failed, as the second run starts from). This checkout only.
 */
export async function keyPoolTimeline() {
  await using pool = await startPool('timeline');
  const queries = Array.from({ length: POOL.series }, (_, i) => `timeline query ${i}`);
  const spec = { baseUrl: pool.nginx.url, dir: pool.dir, name: 'bench-timeline', sinks: ['sqlite'], queries, maxPages: POOL.pagesPerSeries, concurrency: POOL.concurrency, requestsPerSecond: POOL.configuredPerKey };
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('WEBDATA_')));
  const once = async (which: 'first' | 'again') => {
    const from = Date.now() / 1000;
    const atStart = load();
    // BENCH_DEBUG makes the fixture print its adapt and pause events on stderr.
    const child = spawn(process.execPath, [FIXTURE], { env: { ...inherited, ...pool.env, BENCH_DEBUG: '1', WEBDATA_TEST_SPEC: JSON.stringify({ ...spec, queries: queries.map((q) => `${which} ${q}`) }) }, stdio: ['ignore', 'ignore', 'pipe'] });
    const adapt: Record<string, [number, number, number, string][]> = {};
    let pending = '';
    child.stderr.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString()).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.includes('"adapt"')) continue;
        const event = JSON.parse(line) as { rate: number; concurrency: number; reason: string; key?: string };
        (adapt[event.key ?? '-'] ??= []).push([round(Date.now() / 1000 - from, 1), round(event.rate, 2), event.concurrency, event.reason]);
      }
    });
    const code = await new Promise<number | null>((resolveExit) => child.on('close', resolveExit));
    const to = Date.now() / 1000;
    const entries = (await pool.nginx.entries()).filter((entry) => entry.at >= from && entry.at <= to + 1);
    const limited = Object.fromEntries(Object.keys(POOL.limits).map((label) => [label, entries.filter((entry) => entry.label === label && entry.status === '429').map((entry) => round(entry.at - from, 1))]));
    // Each key's first requests as nginx logged them (seconds since spawn, status; a 200 ends a latency after it came).
    const opening = Object.fromEntries(Object.keys(POOL.limits).map((label) => [label, entries.filter((entry) => entry.label === label).slice(0, 8).map((entry) => `${round(entry.at - from - (entry.status === '200' ? LATENCY_MS / 1000 : 0), 3)}:${entry.status}`)]));
    return { run: which, exitCode: code, opening, loadAverage: { atStart, atEnd: load() }, nginx: witness(entries, from, to, POOL.limits), adapt, limited429At: limited, remembered: rememberedLimits(join(pool.dir, 'out.sqlite')) };
  };
  return { first: await once('first'), again: await once('again') };
}

/** What a state file remembers of its keys' limits (rate, lowest failure), by fingerprint: the bench reads, never writes. */
function rememberedLimits(file: string): { rate: number; above: number | null }[] {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT rate, above FROM key_limits ORDER BY rate DESC').all() as { rate: number; above: number | null }[]).map(({ rate, above }) => ({ rate: round(rate, 2), above: above === null ? null : round(above, 2) }));
  } finally {
    db.close();
  }
}

if (import.meta.main) {
  const which = process.argv[2] ?? 'pool';
  const roots = process.argv.slice(3).map((root) => resolve(root));
  for (const root of roots.length === 0 ? [ROOT] : roots) {
    const result = which === 'pool' ? await scenarioKeyPool(root) : which === 'revoked' ? await scenarioKeyRevoked(root) : which === 'timeline' ? await keyPoolTimeline() : await scenarioOneKey(root);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  }
}
