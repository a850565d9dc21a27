// What an allowance costs a page (issue 41: "the ledger costs nothing measurable per page"), measured as a user runs
// it: `webdata-etl run pipeline.json` spawned, timed from spawn to exit, the same pipeline with no allowance and with
// one (a month of 1,000,000 credits: every request held from the state store's ledger, in chunks, and its spend row
// carrying its key and period), alternately, against an unlimited simulator, SQLite state. The figure is the median
// wall time of each and their difference per page.
// Alone: `node scripts/with-node.mjs test/bench/allowance-ledger.ts [pages] [rounds]`.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startSimulator } from '../../src/simulator/index.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const KEY = 'bench_allowance_0123456789abcdef';
const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
const median = (values: number[]) => {
  const sorted = values.toSorted((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
};

function runCli(dir: string, file: string, baseUrl: string): Promise<{ code: number | null; wallSeconds: number; pages: number; status: string }> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('WEBDATA_')));
  const started = performance.now();
  const child = spawn(process.execPath, ['--conditions=webdata-etl:source', join(ROOT, 'src/cli/main.ts'), 'run', file], {
    cwd: dir,
    env: { ...inherited, WEBDATA_BASE_URL: baseUrl, WEBDATA_API_KEY: KEY },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolveRun, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const wallSeconds = (performance.now() - started) / 1000;
      try {
        const summary = JSON.parse(stdout) as { status: string; pages: { fetched: number } };
        resolveRun({ code, wallSeconds, pages: summary.pages.fetched, status: summary.status });
      } catch {
        reject(new Error(`no summary (exit ${code}): ${stderr.slice(-400)}`));
      }
    });
  });
}

function pipelineFile(dir: string, name: string, pages: number, allowance: boolean): string {
  const file = join(dir, `${name}.json`);
  const queries = Array.from({ length: Math.ceil(pages / 10) }, (_, i) => `${name} query ${i}`);
  writeFileSync(
    file,
    JSON.stringify({
      name,
      search: { queries, countries: ['us'], maxPages: 10 },
      sinks: [{ type: 'sqlite', path: `${name}.sqlite` }],
      rate: { concurrency: 8 },
      ...(allowance ? { allowance: { credits: 1_000_000, per: 'month', timezone: 'Europe/Berlin' } } : {}),
    }),
  );
  return file;
}

/** `rounds` runs of each, alternately (each on a fresh state file): median wall time and pages a second. */
export async function scenarioAllowanceLedger(pages = 1000, rounds = 3) {
  await using sim = await startSimulator({ keys: [{ key: KEY, name: 'bench' }], resultsPerQuery: 100 });
  const walls = { none: [] as number[], allowance: [] as number[] };
  const loads: number[] = [];
  for (let i = 0; i < rounds; i += 1) {
    for (const kind of ['none', 'allowance'] as const) {
      const dir = mkdtempSync(join(tmpdir(), 'webdata-allowance-bench-'));
      try {
        const result = await runCli(dir, pipelineFile(dir, `${kind}-${i}`, pages, kind === 'allowance'), sim.url);
        if (result.code !== 0 || result.pages !== pages) throw new Error(`${kind}: exit ${result.code}, ${result.pages} of ${pages} pages, ${result.status}`);
        walls[kind].push(result.wallSeconds);
        loads.push(round(loadavg()[0] ?? 0, 2));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const none = median(walls.none);
  const withAllowance = median(walls.allowance);
  return {
    pages,
    rounds,
    wallSeconds: { none: walls.none.map((wall) => round(wall, 2)), allowance: walls.allowance.map((wall) => round(wall, 2)) },
    medianWallSeconds: { none: round(none, 2), allowance: round(withAllowance, 2) },
    pagesPerSecond: { none: round(pages / none, 1), allowance: round(pages / withAllowance, 1) },
    /** The allowance's cost per page from the medians (negative: within the noise). */
    msPerPage: round(((withAllowance - none) * 1000) / pages, 3),
    loadAverage: loads,
  };
}

if (import.meta.filename === process.argv[1]) {
  const [pages, rounds] = process.argv.slice(2).map(Number);
  process.stdout.write(`${JSON.stringify(await scenarioAllowanceLedger(pages || undefined, rounds || undefined), null, 2)}\n`);
}
