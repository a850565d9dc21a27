import type { JournalEntry, RunRecord, SeriesProgress } from './interfaces.ts';
import type { FailedSeries } from './notification-store.ts';
import type { NotificationRecord } from './notification-store.ts';
import type { OccurrenceOutcome, OccurrenceRecord } from './occurrence-store.ts';
import { applyStateChanges } from './state-changes.ts';

/*
 * Rows of the state tables as the interfaces give them, whichever database they came from: both stores keep the same
 * columns, JSON as text; PostgreSQL hands over times as Date and bigints as text, SQLite as text and numbers.
 */

const iso = (value: unknown): string | null => (value instanceof Date ? value.toISOString() : ((value as string | null) ?? null));

export function runRecordFrom(row: Record<string, unknown>): RunRecord {
  return {
    runId: row.run_id as string,
    pipeline: row.pipeline as string,
    status: row.status as string,
    startedAt: iso(row.started_at) as string,
    finishedAt: iso(row.finished_at),
    fingerprint: row.fingerprint as string,
    plan: JSON.parse(row.plan as string) as Record<string, unknown>,
    terms: row.terms ? (JSON.parse(row.terms as string) as Record<string, unknown>) : null,
    budget: (row.budget as number | null) ?? null,
    summary: row.summary ? (JSON.parse(row.summary as string) as Record<string, unknown>) : null,
    error: (row.error as string | null) ?? null,
    invocations: row.invocations as number,
  };
}

export function occurrenceRecordFrom(row: Record<string, unknown>): OccurrenceRecord {
  return {
    pipeline: row.pipeline as string,
    // SQLite keeps the ISO text it was given; PostgreSQL's timestamptz comes as a Date.
    dueAt: new Date(iso(row.due_at) as string).toISOString(),
    outcome: row.outcome as OccurrenceOutcome,
    runId: (row.run_id as string | null) ?? null,
    worker: (row.worker as string | null) ?? null,
    claimedAt: new Date(iso(row.claimed_at) as string).toISOString(),
    note: (row.note as string | null) ?? null,
  };
}

/** `changes`: what each page changed in the stage states since the row's snapshot, in order (JSON text). */
export function seriesProgressFrom(seriesId: string, row: Record<string, unknown>, changes: readonly string[]): SeriesProgress {
  return {
    seriesId,
    status: row.status as SeriesProgress['status'],
    reason: (row.reason as string | null) ?? null,
    nextPage: (row.next_page as number | null) ?? null,
    pages: row.pages as number,
    digest: (row.digest as string | null) ?? null,
    noNew: row.no_new as number,
    cursor: row.cursor ? (JSON.parse(row.cursor as string) as Record<string, unknown>) : null,
    state: stageStates(seriesId, row.state as string | null, changes),
    error: (row.error as string | null) ?? null,
  };
}

export function journalEntryFrom(row: Record<string, unknown>): JournalEntry {
  return {
    seq: Number(row.seq),
    runId: row.run_id as string,
    pageKey: row.page_key as string,
    seriesId: row.series_id as string,
    number: row.number as number,
    meta: JSON.parse(row.meta as string) as Record<string, unknown>,
    output: JSON.parse(row.output as string) as unknown[],
  };
}

export function notificationFrom(row: Record<string, unknown>): NotificationRecord {
  return {
    runId: row.run_id as string,
    invocation: Number(row.invocation),
    webhook: row.webhook as string,
    pipeline: row.pipeline as string,
    target: row.target as string,
    event: row.event as string,
    status: row.status as NotificationRecord['status'],
    attempts: Number(row.attempts),
    error: (row.error as string | null) ?? null,
    body: (row.body as string | null) ?? null,
    createdAt: iso(row.created_at) as string,
    updatedAt: iso(row.updated_at) as string,
  };
}

export function failedSeriesFrom(row: Record<string, unknown>): FailedSeries {
  return {
    seriesId: row.series_id as string,
    endpoint: row.endpoint as string,
    query: row.query as string,
    country: row.country as string,
    lang: row.lang as string,
    errorKind: (row.error_kind as string | null) ?? null,
    error: (row.error as string | null) ?? null,
  };
}

/** The series' stage states: its snapshot with every later page's changes applied; a damaged one is refused naming the series. */
function stageStates(seriesId: string, snapshot: string | null, changes: readonly string[]): Record<string, object> | null {
  if (!snapshot && changes.length === 0) return null;
  try {
    return applyStateChanges(snapshot ? JSON.parse(snapshot) : null, changes.map((text) => JSON.parse(text) as unknown));
  } catch (error) {
    throw new Error(`the stage state of series ${seriesId} in the state store is damaged (${(error as Error).message}): start the run afresh (\`fresh: true\`), or restore the state store from a backup`);
  }
}
