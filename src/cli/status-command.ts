import { parseArgs } from 'node:util';
import { latestOccurrences, type OccurrenceStatus, runStatus, type RunStatusReport } from '../distributed/status.ts';
import { claimAnomaly } from '../recurring/claim-anomaly.ts';
import { inZone, occurrencesOf } from '../recurring/occurrences.ts';
import type { Schedule } from '../recurring/schedule-config.ts';
import { atDatabase } from '../postgres/failure.ts';
import { openPool } from '../postgres/pools.ts';
import { stateDatabase } from '../run/outputs.ts';
import { UsageError } from '../errors/usage-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { postgresNameSchema, stateStoreWhere } from '../postgres/target.ts';
import { stateUrlFrom } from './database-filters.ts';
import { EXIT } from '../run/exit-codes.ts';
import { loadPipeline } from '../config/load-pipeline.ts';
import type { KeySummary } from '../run/summary.ts';
import { storedKeys } from '../run/summary-keys.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import { keyLines } from './key-lines.ts';
import { statusStatements as statusSql } from './statements.ts';

export const statusHelp = `Usage: webdata-etl status <pipeline.ts|pipeline.json> [--state postgres://…] [--json]

Where the pipeline's latest run stands and who works it: series ended of the plan's, pages, rows, credits
against the budget, the shared rate, a run-wide stop, and each worker (id, host, pid, leader, the pages it
committed, the credits it was charged — pages it paid for but never committed included —, seconds since its
last heartbeat). The workers' pages add up to the run's, and so do their credits. A pool of keys: each key's
requests, 429s, credits and rates, and which were retired, when and why, as the run's last summary has them.
A scheduled pipeline's schedule, its next occurrence, and what became of its latest ones (started, resumed, skipped, missed, failed;
a claim made ahead of its time marked as an anomaly, naming its worker: docs/schedules.md). For runs whose state is in PostgreSQL (a distributed run's); watch it with
\`watch webdata-etl status …\`.

Options:
  --json                 the report as one JSON object
  --state <url>          the pipeline's state is in this PostgreSQL database (as for run; or WEBDATA_STATE_URL)
  --state-schema <name>  the schema of the run state (default webdata, or the pipeline's state.schema)
  -h, --help             show this help
`;

export async function statusCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: { json: { type: 'boolean' }, state: { type: 'string' }, 'state-schema': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(statusHelp);
    return EXIT.ok;
  }
  const [file] = positionals;
  if (!file || positionals.length > 1) throw new UsageError('status takes one pipeline file: webdata-etl status pipelines/rank-tracking.ts --state postgres://…');
  // Quoted into every statement: a name, checked as the pipeline's state.schema is.
  const stateSchema = values['state-schema'] === undefined ? undefined : ValidationError.parse(postgresNameSchema, values['state-schema'], 'Invalid option', '--state-schema');
  const pipeline = await loadPipeline(file);
  const target = stateDatabase(pipeline, stateUrlFrom(values.state, process.env.WEBDATA_STATE_URL));
  if (!target) {
    throw new UsageError(`status reads a run state in PostgreSQL, and pipeline "${pipeline.name}" keeps its state in a SQLite file: see webdata-etl runs ${file}`);
  }
  const pool = openPool(target, 1);
  let report: RunStatusReport | undefined;
  let occurrences: OccurrenceStatus[] = [];
  let keys: KeySummary[] | undefined;
  try {
    const schema = stateSchema ?? pipeline.state.schema;
    const where = stateStoreWhere(target);
    report = await atDatabase(where, () => runStatus(pool, schema, pipeline.name, pipeline.source.plan().seriesCount), pool);
    if (report) keys = await atDatabase(where, () => summaryKeysOf(pool, schema, (report as RunStatusReport).runId), pool);
    if (pipeline.schedule) occurrences = await atDatabase(where, () => latestOccurrences(pool, schema, pipeline.name, SHOWN_OCCURRENCES), pool);
  } finally {
    await pool.end();
  }
  const schedule = pipeline.schedule ? scheduleReport(pipeline.schedule, occurrences) : undefined;
  if (values.json) {
    // The run's report as it was (null before the first run), with the schedule's beside it when there is one. `keys`
    // are a distributed pool's live shared rows; `summaryKeys` the pool as the run's last summary counted it.
    const shown = report && keys ? { ...report, summaryKeys: keys } : report;
    process.stdout.write(`${JSON.stringify(schedule ? { ...(shown ?? { runId: null }), schedule } : (shown ?? null))}\n`);
    return EXIT.ok;
  }
  if (!report) process.stderr.write(`pipeline "${pipeline.name}" has no runs yet\n`);
  // A distributed pool's live rows say its keys (describe); the last summary's counts, when there are none.
  else process.stdout.write(describe(pipeline.name, report) + (report.keys.length > 0 ? '' : keyLines(keys, (_, text) => text).join('')));
  if (schedule) process.stdout.write(describeSchedule(schedule));
  return EXIT.ok;
}

/** Summaries larger than this are not read (a real one is a few KB). */
const MAX_SUMMARY = 1_000_000;

/**
 * The pool's keys of the run's last summary (its latest invocation's end, docs/pipelines.md#the-run-summary): none
 * while its first invocation runs, for a run with one key, or a summary from before pools.
 */
async function summaryKeysOf(pool: ReturnType<typeof openPool>, schema: string, runId: string): Promise<KeySummary[] | undefined> {
  const { rows } = await pool.query<{ summary: string | null }>(statusSql.summary(`${quoteIdentifier(schema)}.runs`), [runId, MAX_SUMMARY]);
  const stored = rows[0]?.summary;
  if (typeof stored !== 'string') return undefined;
  try {
    return storedKeys((JSON.parse(stored) as { keys?: unknown } | null)?.keys);
  } catch {
    return undefined;
  }
}

/** How many of a schedule's latest occurrences `status` shows. */
const SHOWN_OCCURRENCES = 10;

/** The schedule, its next occurrence, and its latest ones, each claim claimed ahead of its time said to be. */
function scheduleReport(schedule: Schedule, occurrences: OccurrenceStatus[]) {
  const now = Date.now();
  const next = occurrencesOf(schedule).next(now);
  const shown = occurrences.map((o) => {
    const anomaly = claimAnomaly(o, now);
    return anomaly === undefined ? o : { ...o, anomaly };
  });
  return { ...schedule, next: next === null ? null : new Date(next).toISOString(), occurrences: shown };
}

function describeSchedule(schedule: ReturnType<typeof scheduleReport>): string {
  const local = (iso: string) => inZone(Date.parse(iso), schedule.timezone);
  const lines = [`schedule: "${schedule.cron}" in ${schedule.timezone} (missed: ${schedule.missed}); next due ${schedule.next === null ? 'never' : local(schedule.next)}`];
  if (schedule.occurrences.length > 0) lines.push('occurrences, latest first:');
  for (const o of schedule.occurrences) {
    const what = ['anomaly' in o ? o.anomaly : '', o.runId ? `run ${o.runId}` : '', o.note ?? ''].filter(Boolean).join('; ');
    lines.push(`  ${local(o.dueAt)}  ${o.outcome.padEnd(8)}${what ? `  ${what}` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A pool's keys, one line each: rate, pause, share, retirement (docs/distributed.md#watching-a-run). */
function describeKeys(keys: RunStatusReport['keys']): string[] {
  const width = Math.max(0, ...keys.map((key) => key.label.length));
  return keys.map((key, i) => {
    const retired = key.retired.map((r) => `retired${r.path === null ? '' : ` for ${r.path}`} (${r.reason}${r.message ? `: ${r.message}` : ''})`);
    const parts = [
      `rate ${key.rate === null ? 'unpaced' : `${key.rate} requests/s`}`,
      ...(key.pausedSeconds > 0 ? [`paused ${key.pausedSeconds} s`] : []),
      ...(key.credits.share === null ? [] : [`credits ${key.credits.spent} of ${key.credits.share}`]),
      ...retired,
    ];
    return `${i === 0 ? 'keys: ' : '      '}${key.label.padEnd(width)}  ${parts.join(', ')}`;
  });
}

function describe(pipeline: string, report: RunStatusReport): string {
  const { credits, series } = report;
  const lines = [
    `${pipeline}: run ${report.runId}, ${report.status}${report.stop ? ` (stopping: ${report.stop.reason})` : ''}, started ${report.startedAt.replace('T', ' ').slice(0, 19)}`,
    `series: ${series.ended} of ${series.total} ended${series.stopped ? `, ${series.stopped} stopped` : ''}; ${report.pages} pages, ${report.rows} rows`,
    `credits: ${credits.spent}${credits.budget === null ? '' : ` of ${credits.budget}`}${credits.uncertain ? ` (${credits.uncertain} uncertain)` : ''}${credits.reserved ? `, ${credits.reserved} reserved` : ''}` +
      `; rate: ${report.rate === null ? 'unpaced' : `${report.rate} requests/s`}`,
  ];
  lines.push(...describeKeys(report.keys));
  if (report.workers.length === 0) return `${lines.join('\n')}\n`;
  const table = [['worker', 'host', 'pid', 'status', 'pages', 'credits', 'last beat']];
  for (const w of report.workers) {
    table.push([w.id, w.host, String(w.pid), `${w.status}${w.leader ? ' (leader)' : ''}`, String(w.pages), String(w.credits), `${w.lastBeatSeconds} s ago`]);
  }
  const widths = (table[0] as string[]).map((_, i) => Math.max(...table.map((row) => (row[i] as string).length)));
  for (const row of table) lines.push(row.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd());
  return `${lines.join('\n')}\n`;
}
