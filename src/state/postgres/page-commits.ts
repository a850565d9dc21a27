import { appendFiles } from '../../commits/file-appends.ts';
import { preparedQuery } from '../../commits/prepared-statement.ts';
import { crashPoint } from '../../crash-points.ts';
import { OutputError } from '../../errors/output-error.ts';
import { SeriesLostError } from '../../errors/series-lost-error.ts';
import { retrying } from '../../postgres/failure.ts';
import type { Client } from 'pg';
import { inTransaction, onKnownSession, type Pool, type PoolClient, transaction } from '../../postgres/pools.ts';
import { commitPipeline } from './commit-pipeline.ts';
import { storable } from '../../postgres/storable.ts';
import type { PageCommit, RunStore } from '../interfaces.ts';
import { pageStatement } from './page-statement.ts';
import { currentSeq } from './runs.ts';
import { runStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

/** What fences a worker's commits: who it is, and its series' jobs, completed in the transaction that ends a series. */
export interface SeriesFence {
  /** The worker's id: each page it commits is counted on its `workers` row in the page's own statement. */
  workerId: string;
  finish(seriesId: string, db: PoolClient): Promise<boolean>;
  /** A page of this worker's was committed. */
  committed(): void;
}

/**
 * How a PostgreSQL store commits pages and ends series: alone (this process holds the pipeline's lease), or behind a
 * worker's `fence` (docs/design.md#the-run-host). A page commits as one statement (`page-statement.ts`), with the rows
 * of the sinks on this database in it, its files' bytes appended just before on this thread. Alone, one at a time,
 * each handed over once the one before has committed (`queuesCommits`: false). Behind a fence, pages are handed over
 * at once and go one behind the other down a pipelined connection (`commit-pipeline.ts`): the server commits one while
 * this process makes the next; a page that ends its series, or brings file bytes, goes its own way once those before
 * it have settled.
 */
export function postgresPageCommits(parts: StoreParts, fence?: SeriesFence): Pick<RunStore, 'commitPage' | 'queuesCommits' | 'close' | 'endSeries'> {
  const sql = runStatements(parts.s);
  const pipeline = fence ? commitPipeline(parts) : undefined;
  // `sent`: the page may have gone down the pipeline already (its answer lost): whether it landed is asked first.
  const commitAlone = async (commit: PageCommit, sent: boolean): Promise<readonly number[]> => {
    const appends = commit.appends ?? [];
    const files = appendFiles(appends);
    const checkpoints = appends.map(({ sinkId }, index) => ({ sinkId, checkpoint: { seq: commit.seq, bytes: files.lengths[index] as number } }));
    const whole: PageCommit = { ...commit, checkpoints: [...commit.checkpoints, ...checkpoints] };
    try {
      await retrying(
        parts.where,
        async (attempt) => {
          // A lost answer to COMMIT leaves the page committed or not: `landed` says which.
          if ((attempt > 1 || sent) && (await landed(parts, sql, whole, fence))) return void fence?.committed();
          await commitOnce(parts, sql, whole, fence);
        },
        { idempotent: true },
      );
    } catch (error) {
      // Another worker has the series: nothing of the page was written, and its bytes go, as a crash's would.
      if (error instanceof SeriesLostError) files.takeBack();
      throw error;
    }
    return files.lengths;
  };
  return {
    queuesCommits: pipeline !== undefined,
    close: async () => pipeline?.close(),
    async commitPage(commit) {
      if (!pipeline) return commitAlone(commit, false);
      // A transaction (the series' job completed with its last page) cannot share the pipelined connection, and file
      // bytes taken back for a refused page must be the file's last.
      const alone = (commit.appends?.length ?? 0) > 0 || commit.progress.status === 'ended';
      return pipeline.commit(
        alone,
        async (db) => {
          await commitOnce(parts, sql, commit, fence, db);
          return [];
        },
        () => commitAlone(commit, !alone),
        async () => ((await landed(parts, sql, commit, fence)) ? (fence?.committed(), []) : undefined),
      );
    },
    async endSeries(runId, series, end) {
      const write = async (db: Pool | PoolClient) =>
        (
          await db.query(
            fence ? sql.endWorkerSeries : sql.endSeries,
            [runId, series.seriesId, series.endpoint, series.query, series.country, series.lang, end.status, end.reason, end.nextPage, end.error, end.errorKind].map(storable),
          )
        ).rowCount;
      if (!fence || end.status !== 'ended') return void (await retrying(parts.where, () => write(parts.pool), { idempotent: true }));
      // A worker's series ends with its job, in one transaction; a job no longer this worker's leaves the series alone.
      await retrying(
        parts.where,
        () =>
          transaction(parts.pool, async (client) => {
            if ((await write(client)) === 0 || !(await fence.finish(series.seriesId, client))) throw lost(series.seriesId);
          }),
        { idempotent: true },
      );
    },
  };
}

type Statements = ReturnType<typeof runStatements>;

/**
 * The whole page — its state, and the rows and checkpoints of the sinks on this database — is one statement
 * (page-statement.ts), which applies only if the page took its place.
 */
async function commitOnce(parts: StoreParts, sql: Statements, commit: PageCommit, fence: SeriesFence | undefined, pipelined?: Client): Promise<void> {
  const { pipeline } = parts;
  const { statement: page, claiming } = pageStatement(parts.s, pipeline, commit, fence?.workerId);
  const dedupe = commit.dedupe;
  crashPoint('page-transaction');
  const statement = page.sql(claiming ? sql.pageTakenClaimed : sql.pageTaken);
  const send = (db: Client | PoolClient) => db.query<{ seq: string; claimed?: number }>(preparedQuery(statement, page.values));
  // On the pool, a connection whose session is known: cut, that session ends before the page is asked after or sent
  // again (`onKnownSession`). A page that ends its series completes the series' job in the same transaction: a crash
  // between the two would otherwise leave a finished series queued, or a completed job whose last page never landed.
  const taken = pipelined
    ? (await send(pipelined)).rows
    : await onKnownSession(parts, async (client) => {
        if (!fence || commit.progress.status !== 'ended') return (await send(client)).rows;
        return inTransaction(client, async () => {
          const { rows } = await send(client);
          if (rows.length > 0 && !(await fence.finish(commit.series.seriesId, client))) throw lost(commit.series.seriesId);
          return rows;
        });
      });
  const refused = claiming && taken[0] ? (dedupe?.keys.length ?? 0) - (taken[0].claimed ?? 0) : 0;
  // Rows dropped for keys another worker took first were counted as written by the stages: the series' counts
  // are put right (a row of the series cannot be changed twice in the page's own statement), once for the page
  // however often the statement is sent.
  if (refused > 0) await storeQuery(parts, sql.uncountRefused, [commit.runId, commit.series.seriesId, refused, commit.progress.nextPage - 1]);
  if (taken.length > 0) return void fence?.committed();
  if (fence) throw lost(commit.series.seriesId);
  throw new OutputError('locked', `the page journal of pipeline "${pipeline}" moved under this run: another process is writing its state. Run again once it has finished`, undefined);
}

/**
 * Whether a page whose answer to COMMIT was lost went in. Alone, the journal's number says (this run holds the
 * pipeline's lease, so nobody else moves it); behind a fence, whether the series has gone past the page.
 */
async function landed(parts: StoreParts, sql: Statements, commit: PageCommit, fence: SeriesFence | undefined): Promise<boolean> {
  if (!fence) return (await currentSeq(parts)) >= commit.seq;
  const number = commit.progress.nextPage - 1;
  const { rows } = await parts.pool.query<{ next_page: number | null; status: string }>(sql.seriesPosition, [commit.runId, commit.series.seriesId]);
  const row = rows[0];
  return row !== undefined && (row.status === 'ended' || (row.next_page ?? 0) > number);
}

function lost(seriesId: string): SeriesLostError {
  return new SeriesLostError(seriesId, `series ${seriesId} was taken over by another worker (this one stalled past its heartbeat): its page here was not written`);
}
