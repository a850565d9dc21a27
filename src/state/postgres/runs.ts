import { atDatabase, retrying } from '../../postgres/failure.ts';
import { transaction } from '../../postgres/pools.ts';
import type { JournalEntry, RunRecords, RunStore, SeriesStatus, SeriesTotals } from '../interfaces.ts';
import { pendingKeys } from '../pending-keys.ts';
import { journalEntryFrom, runRecordFrom, seriesProgressFrom } from '../rows.ts';
import { leasePipeline } from './lease.ts';
import { runStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

type Statements = ReturnType<typeof runStatements>;

/** What of the runs-and-pages role a page's commit and a series' end are not (`page-commits.ts`: behind a fence). */
export type PostgresRuns = Omit<RunStore, 'commitPage' | 'queuesCommits' | 'close' | 'endSeries'>;

/**
 * Runs and pages in PostgreSQL (docs/design.md#the-state-store): everything a run writes carries its pipeline, so that
 * one schema serves many; the lease is one pipeline's.
 */
export function postgresRuns(parts: StoreParts): PostgresRuns {
  const sql = runStatements(parts.s);
  const { pool, pipeline } = parts;
  return {
    path: `${parts.target.label} (schema ${parts.schema})`,
    database: parts.target.database,
    lease: (name) => atDatabase(parts.where, () => leasePipeline(pool, sql, parts.schema, name)),
    checkpoints: {
      async get(sinkId) {
        const [row] = await storeQuery<{ seq: string; bytes: string | null }>(parts, sql.checkpoint, [pipeline, sinkId]);
        return row && { seq: Number(row.seq), bytes: row.bytes === null ? null : Number(row.bytes) };
      },
      async set(sinkId, checkpoint) {
        await retrying(parts.where, () => pool.query(sql.setCheckpoint, [pipeline, sinkId, checkpoint.seq, checkpoint.bytes]), { idempotent: true });
      },
    },
    seenKeys: (runId) =>
      pendingKeys(runId, {
        has: async (scope, keys) => (await storeQuery<{ key: string }>(parts, sql.seenKeys, [pipeline, scope, keys])).map((row) => row.key),
        forgetRun: async () => void (await storeQuery(parts, sql.forgetRunKeys, [pipeline, runId])),
      }),
    ...runRecords(parts, sql),
    ...seriesAndJournal(parts, sql),
    async recordSinkStarts(runId, starts) {
      for (const start of starts) await storeQuery(parts, sql.recordSinkStart, [runId, start.sinkId, start.seq, start.bytes]);
    },
    async sinkStarts(runId) {
      const rows = await storeQuery<{ sink_id: string; start_seq: string; start_bytes: string | null }>(parts, sql.sinkStarts, [runId]);
      return new Map(rows.map((r) => [r.sink_id, { seq: Number(r.start_seq), bytes: r.start_bytes === null ? null : Number(r.start_bytes) }]));
    },
  };
}

/** The runs' own rows. */
function runRecords(parts: StoreParts, sql: Statements): RunRecords {
  return {
    async startRun(run) {
      // Run-scoped dedupe keys of the pipeline's finished runs go: the last worker of a distributed run forgets its
      // run's keys, but two that finish at once each leave them to the other (a run that goes on must keep them).
      await storeQuery(parts, sql.dropFinishedRunKeys, [parts.pipeline]);
      const terms = run.terms === undefined ? null : JSON.stringify(run.terms);
      await storeQuery(parts, sql.insertRun, [run.runId, run.pipeline, run.startedAt, run.fingerprint, JSON.stringify(run.plan), run.budget, terms]);
    },
    async reopenRun(runId, budget, terms) {
      await storeQuery(parts, sql.reopenRun, [budget, runId, terms === undefined ? null : JSON.stringify(terms)]);
    },
    async finishRun(runId, status, finishedAt, summary, error) {
      await storeQuery(parts, sql.finishRun, [status, finishedAt, summary === undefined ? null : JSON.stringify(summary), error ?? null, runId]);
    },
    async latestRun(name) {
      // In the order runs were recorded (a sequence), never by `started_at`: that is the clock of whichever machine
      // started the run, and a machine whose clock is behind would make a run at work look older than a finished one.
      const [row] = await storeQuery(parts, sql.latestRun, [name]);
      return row && runRecordFrom(row);
    },
    async runs(name) {
      return (await storeQuery(parts, sql.runs, [name])).map(runRecordFrom);
    },
    async abandonRun(runId, at) {
      const abandon = () =>
        transaction(parts.pool, async (client) => {
          await client.query(sql.abandonPages, [parts.pipeline, runId]);
          await client.query(sql.abandonSeries, [runId]);
          await client.query(sql.abandonStateChanges, [runId]);
          await client.query(sql.markAbandoned, [at, runId]);
        });
      await retrying(parts.where, abandon, { idempotent: true });
    },
  };
}

/** Series progress and how they ended, and the journal. */
function seriesAndJournal(parts: StoreParts, sql: Statements): Pick<RunStore, 'currentSeq' | 'progress' | 'seriesTotals' | 'seriesEnds' | 'seriesStatuses' | 'reachedStatuses' | 'seriesProgresses' | 'failedKinds' | 'journalAfter' | 'prune'> {
  return {
    currentSeq: () => retrying(parts.where, () => currentSeq(parts), { idempotent: true }),
    async progress(runId, seriesId) {
      // The row and the changes after its snapshot in one statement: a worker may be committing the series meanwhile.
      const [row] = await storeQuery(parts, sql.progress, [runId, seriesId]);
      return row && seriesProgressFrom(seriesId, row, row.state_changes as string[]);
    },
    seriesTotals: async (runId) => (await storeQuery<SeriesTotals>(parts, sql.seriesTotals, [runId]))[0] as SeriesTotals,
    seriesEnds: (runId) => storeQuery<{ status: string; reason: string | null; n: number }>(parts, sql.seriesEnds, [runId]),
    seriesStatuses: (runId, seriesIds) => storeQuery<SeriesStatus>(parts, sql.seriesStatuses, [runId, seriesIds]),
    reachedStatuses: (runId, after, limit) => storeQuery<SeriesStatus>(parts, sql.reachedStatuses, [runId, after, limit]),
    async seriesProgresses(runId, seriesIds) {
      const rows = await storeQuery(parts, sql.progresses, [runId, seriesIds]);
      return rows.map((row) => seriesProgressFrom(row.series_id as string, row, row.state_changes as string[]));
    },
    async failedKinds(runId) {
      const rows = await storeQuery<{ kind: string; n: number }>(parts, sql.failedKinds, [runId]);
      return Object.fromEntries(rows.map((r) => [r.kind, r.n]));
    },
    async *journalAfter(seq): AsyncGenerator<JournalEntry> {
      let after = seq;
      for (;;) {
        const rows = await storeQuery(parts, sql.journalAfter, [parts.pipeline, after]);
        if (rows.length === 0) return;
        for (const row of rows) {
          const entry = journalEntryFrom(row);
          after = entry.seq;
          yield entry;
        }
      }
    },
    prune: async (heldByAll) => void (await storeQuery(parts, sql.prune, [parts.pipeline, heldByAll])),
  };
}

/** Where the pipeline's journal stands (tried once: callers say whether to try again). */
export async function currentSeq(parts: StoreParts): Promise<number> {
  const { rows } = await parts.pool.query<{ seq: string }>(runStatements(parts.s).currentSeq, [parts.pipeline]);
  return Number(rows[0]?.seq ?? 0);
}
