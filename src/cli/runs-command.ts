import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isPostgresDatabase, openReader, type Reader } from '../analytics/reader.ts';
import type { RunSummary } from '../run/summary.ts';
import { EXIT } from '../run/exit-codes.ts';
import { claimAnomaly } from '../recurring/claim-anomaly.ts';
import { runsStatements as sql } from './statements.ts';
import { keysNote } from './key-lines.ts';
import { stateDatabaseArgument } from './state-argument.ts';
import { storedKeys } from '../run/summary-keys.ts';
import { refreshNote } from '../run/refresh-summary.ts';

export const runsHelp = `Usage: webdata-etl runs <pipeline.ts|pipeline.json|state.sqlite|postgres://…> [--json]

Lists a pipeline's runs, oldest first: status, when, requests, credits, rows, series, why it stopped, the refresh
plan's choices (refresh.priority "changes": series chosen and skipped, pages budgeted, expected and spent), and a
pool's keys (each one's requests and 429s, and which were retired: when and why with --json);
and webhooks not (yet) told of a run's end (all notifications, delivered too, with --json).
A scheduled pipeline's occurrences that made no run are listed among them in time order, by their due time and
fate (skipped: its run was still at work; missed: no worker was up; failed: its run could not start), and a run
an occurrence started names it; a claim made ahead of its time is marked as an anomaly, naming the worker whose
clock ran ahead (docs/schedules.md).
Given a pipeline file, reads its state store; given a database, lists every pipeline's runs in it.

Options:
  --json                 one JSON object per run or occurrence
  --state <url>          the pipeline's state is in this PostgreSQL database (as for run; or WEBDATA_STATE_URL)
  --state-schema <name>  PostgreSQL: the schema of the run state (default webdata, or the pipeline's state.schema)
  --database-url <url>   a PostgreSQL state database, in place of the file argument
  -h, --help             show this help
`;

interface NotificationRow {
  run_id: string;
  invocation: number;
  target: string;
  event: string;
  status: string;
  attempts: number;
  error: string | null;
  updated_at: string;
}

/** An occurrence's columns as `runs` reads them. */
interface OccurrenceRow {
  pipeline: string;
  due_at: string;
  outcome: string;
  run_id: string | null;
  worker: string | null;
  claimed_at: string;
  note: string | null;
}

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
  const { database, stateSchema, pipeline } = await stateDatabaseArgument('runs', positionals, values);
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
    const notifications = await notificationsOf(reader, pipeline);
    // One pipeline's, given its file; else every pipeline's in the database.
    const only = pipeline ? [pipeline] : [];
    // A schedule's occurrences: few (those without a run are pruned to the latest thousand), read whole.
    const occurrences = (await reader.exists('occurrences', 'state'))
      ? ((await reader.all(sql.occurrences(reader.name('occurrences', 'state'), only.length > 0), only)) as unknown as OccurrenceRow[])
      : [];
    const startedBy = new Map<string, OccurrenceRow>();
    for (const occurrence of occurrences) if (occurrence.run_id !== null && !startedBy.has(occurrence.run_id)) startedBy.set(occurrence.run_id, occurrence);
    const runless = occurrences.filter((occurrence) => occurrence.run_id === null);
    const emit = (line: ReturnType<typeof describe> | ReturnType<typeof describeOccurrence>) => {
      if (values.json) process.stdout.write(`${JSON.stringify(line)}\n`);
      else table.push(cells(line));
    };
    // The occurrences that made no run, each before the first run that began after it was due.
    const emitRunlessUntil = (at: number) => {
      while (runless.length > 0 && Date.parse((runless[0] as OccurrenceRow).due_at) <= at) {
        const row = runless.shift() as OccurrenceRow;
        // A missed occurrence's notification is keyed by its pipeline and the latest occurrence it tells of.
        emit(describeOccurrence(row, notifications.get(`missed:${row.pipeline}@${new Date(row.due_at).toISOString()}`) ?? []));
      }
    };
    const rows = reader.iterate(sql.runs(reader.name('runs', 'state'), reader.dialect, only.length > 0), only);
    for await (const row of rows) {
      const run = describe(row as unknown as RunRow, notifications.get((row as unknown as RunRow).run_id) ?? [], startedBy.get((row as unknown as RunRow).run_id));
      emitRunlessUntil(Date.parse(run.startedAt));
      emit(run);
    }
    emitRunlessUntil(Number.POSITIVE_INFINITY);
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

/** The notifications of the runs shown, by run (a store older than notifications has none). */
async function notificationsOf(reader: Reader, pipeline: string | undefined): Promise<Map<string, NotificationRow[]>> {
  const byRun = new Map<string, NotificationRow[]>();
  if (!(await reader.exists('notifications', 'state'))) return byRun;
  const only = pipeline ? [pipeline] : [];
  const rows = await reader.all(sql.notifications(reader.name('notifications', 'state'), only.length > 0), only);
  for (const row of rows as unknown as NotificationRow[]) byRun.set(row.run_id, [...(byRun.get(row.run_id) ?? []), row]);
  return byRun;
}

/** An occurrence, as `runs --json` gives it: when it was due and what became of it; a claim made ahead of time, said. */
function occurrenceOf(row: OccurrenceRow) {
  const dueAt = new Date(row.due_at).toISOString();
  const anomaly = claimAnomaly({ dueAt, claimedAt: new Date(row.claimed_at).toISOString(), worker: row.worker }, Date.now());
  return { dueAt, outcome: row.outcome, note: row.note, worker: row.worker, ...(anomaly === undefined ? {} : { anomaly }) };
}

/** An occurrence that made no run, as `runs --json` gives it: its status is its fate; missed, its webhooks told of it. */
function describeOccurrence(row: OccurrenceRow, notifications: readonly NotificationRow[]) {
  return { runId: null, pipeline: row.pipeline, status: row.outcome, occurrence: occurrenceOf(row), notifications: notifications.map(notificationShown) };
}

/** A notification, as `runs --json` gives it. */
function notificationShown(n: NotificationRow) {
  return { invocation: Number(n.invocation), webhook: n.target, event: n.event, status: n.status, attempts: Number(n.attempts), error: n.error, at: n.updated_at };
}

/** A run as `runs --json` gives it; with the occurrence of its schedule that started it, if one did. */
function describe(row: RunRow, notifications: readonly NotificationRow[], occurrence?: OccurrenceRow) {
  // Summaries of interrupted invocations may be partial: read every field as optional.
  const summary = row.summary ? (JSON.parse(row.summary) as Partial<RunSummary>) : undefined;
  const keys = storedKeys(summary?.keys);
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
    /** Served, written, duplicates, dropped by stages (a summary older than `dropped` lacks it). */
    items: summary?.items,
    series: summary?.series,
    /** The refresh plan (`refresh.priority: 'changes'`): its budget in pages, pages expected and spent, series chosen and skipped by reason. */
    ...(summary?.refresh ? { refresh: summary.refresh } : {}),
    /** A pool's keys (docs/pipelines.md#the-run-summary); none for one key, or a summary from before pools. */
    ...(keys ? { keys } : {}),
    error: row.error,
    notifications: notifications.map(notificationShown),
    ...(occurrence ? { occurrence: occurrenceOf(occurrence) } : {}),
  };
}

/** "webhook https://hooks.example/x failed after 5 attempts (HTTP 500)": what is owed or lost, never what went well. */
function notificationNote(notification: ReturnType<typeof notificationShown>): string {
  if (notification.status === 'delivered') return '';
  if (notification.status === 'pending') return `webhook ${notification.webhook} pending (sent again by the next run)`;
  if (notification.status === 'sending') return `webhook ${notification.webhook} being sent (if its process ended first, sent again by a run some minutes later)`;
  return `webhook ${notification.webhook} failed after ${notification.attempts} attempt${notification.attempts === 1 ? '' : 's'}${notification.error ? ` (${notification.error})` : ''}`;
}

/** A run's line of the table, or an occurrence's that made none. */
function cells(line: ReturnType<typeof describe> | ReturnType<typeof describeOccurrence>): string[] {
  if (line.runId === null) {
    const { occurrence } = line;
    // Its time is when it was due.
    return ['-', line.pipeline, line.status, shortTime(occurrence.dueAt), '', '', '', '', [occurrence.anomaly, occurrence.note, ...line.notifications.map(notificationNote)].filter(Boolean).join('; ')];
  }
  const run = line as ReturnType<typeof describe>;
  const scheduled = run.occurrence ? `scheduled ${shortTime(run.occurrence.dueAt)}${run.occurrence.note ? ` (${run.occurrence.note})` : ''}${run.occurrence.anomaly ? `; ${run.occurrence.anomaly}` : ''}` : '';
  const note = run.error ?? (run.invocations > 1 ? `${run.invocations} invocations` : '');
  return [
    run.runId,
    run.pipeline,
    run.reason ? `${run.status} (${run.reason})` : run.status,
    shortTime(run.startedAt),
    String(run.requests ?? ''),
    run.credits.spent === undefined ? '' : `${run.credits.spent}${run.credits.budget === null ? '' : `/${run.credits.budget}`}`,
    `${run.rows ?? ''}${run.items?.dropped ? ` (${run.items.dropped} dropped)` : ''}`,
    run.series ? `${run.series.completed}/${run.series.total}${run.series.failed ? ` (${run.series.failed} failed)` : ''}${run.series.skipped ? ` (${run.series.skipped} skipped)` : ''}` : '',
    [note, scheduled, refreshNote(run.refresh), keysNote(run.keys), ...run.notifications.map(notificationNote)].filter(Boolean).join('; '),
  ];
}

/** A time in the table: `2026-11-21 22:30:05`, UTC. */
function shortTime(iso: string): string {
  return iso.replace('T', ' ').slice(0, 19);
}
