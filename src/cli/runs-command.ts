import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isPostgresDatabase, openReader } from '../analytics/reader.ts';
import { POSTGRES } from '../analytics/views.ts';
import { stateDatabase, statePath } from '../run/outputs.ts';
import { checkDatabaseArgument, oneDatabase, stateUrlFrom } from './database-filters.ts';
import type { PostgresTarget } from '../postgres/target.ts';
import type { RunSummary } from '../run/summary.ts';
import { EXIT } from '../run/exit-codes.ts';
import { loadPipeline } from '../config/load-pipeline.ts';
import { UsageError } from '../errors/usage-error.ts';

export const runsHelp = `Usage: webdata-etl runs <pipeline.ts|pipeline.json|state.sqlite|postgres://…> [--json]

Lists a pipeline's runs, oldest first: status, when, requests, credits, rows, series, and why it stopped.
Given a pipeline file, reads its state store; given a database, lists every pipeline's runs in it.

Options:
  --json                 one JSON object per run
  --state <url>          the pipeline's state is in this PostgreSQL database (as for run; or WEBDATA_STATE_URL)
  --state-schema <name>  PostgreSQL: the schema of the run state (default webdata, or the pipeline's state.schema)
  --database-url <url>   a PostgreSQL state database, in place of the file argument
  -h, --help             show this help
`;

/** The columns `runs` shows: never `plan`, a run's whole stored plan (tens of MB for a million queries). */
const SHOWN = 'run_id, pipeline, status, started_at, finished_at, budget, summary, error, invocations';

interface RunRow {
  run_id: string;
  pipeline: string;
  status: string;
  started_at: string;
  finished_at: string | null;
  budget: number | null;
  summary: string | null;
  error: string | null;
  invocations: number;
}

export async function runsCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: { json: { type: 'boolean' }, state: { type: 'string' }, 'state-schema': { type: 'string' }, 'database-url': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(runsHelp);
    return EXIT.ok;
  }
  const [file] = values['database-url'] === undefined ? positionals : [oneDatabase(positionals, 'runs', 'webdata-etl runs --database-url postgres://…', values['database-url'])];
  if (!file || positionals.length > 1) throw new UsageError('runs takes one pipeline file or state database: webdata-etl runs pipelines/rank-tracking.ts');
  checkDatabaseArgument(file);
  let database: string | PostgresTarget = file;
  let pipeline: string | undefined;
  let stateSchema = values['state-schema'];
  if (!isPostgresDatabase(file) && !/\.(sqlite|sqlite3|db)$/i.test(file)) {
    const loaded = await loadPipeline(file);
    database = stateDatabase(loaded, stateUrlFrom(values.state, process.env.WEBDATA_STATE_URL)) ?? statePath(loaded);
    stateSchema ??= loaded.state.schema;
    pipeline = loaded.name;
  }
  if (typeof database === 'string' && !isPostgresDatabase(database) && !existsSync(database)) {
    process.stderr.write(`no runs yet (${database} does not exist)\n`);
    return EXIT.ok;
  }
  const reader = await openReader(database, { stateSchema });
  // One run at a time, each written (JSON) or kept as its table's cells: memory holds no run's stored plan, and
  // little per run.
  const table = [['run', 'pipeline', 'status', 'started', 'requests', 'credits', 'rows', 'series', 'note']];
  try {
    if (!(await reader.exists('runs', 'state'))) return noRuns(values.json);
    const recorded = reader.dialect === POSTGRES ? 'created' : 'rowid';
    const rows = reader.iterate(`SELECT ${SHOWN} FROM ${reader.name('runs', 'state')} ${pipeline ? 'WHERE pipeline = ?' : ''} ORDER BY started_at, ${recorded}`, pipeline ? [pipeline] : []);
    for await (const row of rows) {
      const run = describe(row as unknown as RunRow);
      if (values.json) process.stdout.write(`${JSON.stringify(run)}\n`);
      else table.push(cells(run));
    }
  } finally {
    await reader.close();
  }
  if (values.json) return EXIT.ok;
  if (table.length === 1) return noRuns(false);
  const widths = (table[0] as string[]).map((_, i) => Math.max(...table.map((r) => (r[i] as string).length)));
  for (const row of table) process.stdout.write(`${row.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd()}\n`);
  return EXIT.ok;
}

function noRuns(json: boolean | undefined): number {
  if (!json) process.stderr.write('no runs yet\n');
  return EXIT.ok;
}

/** A run as `runs --json` gives it. */
function describe(row: RunRow) {
  // Summaries of interrupted invocations may be partial: read every field as optional.
  const summary = row.summary ? (JSON.parse(row.summary) as Partial<RunSummary>) : undefined;
  return {
    runId: row.run_id,
    pipeline: row.pipeline,
    status: row.status,
    reason: summary?.reason,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    invocations: row.invocations,
    durationMs: summary?.durationMs,
    requests: summary?.requests?.total,
    credits: { spent: summary?.credits?.spent, uncertain: summary?.credits?.uncertain, budget: row.budget },
    rows: summary?.items?.written,
    series: summary?.series,
    error: row.error,
  };
}

/** A run's line of the table. */
function cells(run: ReturnType<typeof describe>): string[] {
  return [
    run.runId,
    run.pipeline,
    run.reason ? `${run.status} (${run.reason})` : run.status,
    run.startedAt.replace('T', ' ').slice(0, 19),
    String(run.requests ?? ''),
    run.credits.spent === undefined ? '' : `${run.credits.spent}${run.credits.budget === null ? '' : `/${run.credits.budget}`}`,
    String(run.rows ?? ''),
    run.series ? `${run.series.completed}/${run.series.total}${run.series.failed ? ` (${run.series.failed} failed)` : ''}` : '',
    run.error ?? (run.invocations > 1 ? `${run.invocations} invocations` : ''),
  ];
}
