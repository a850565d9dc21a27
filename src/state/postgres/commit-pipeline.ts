import type pg from 'pg';
import { SeriesLostError } from '../../errors/series-lost-error.ts';
import { isRefusedValue } from '../../errors/unstorable-page-error.ts';
import { explainPostgresFailure, isTransient } from '../../postgres/failure.ts';
import { openPipelinedClient } from '../../postgres/pools.ts';
import { endSession, type ServerSession, sessionOf } from '../../postgres/sessions.ts';
import type { StoreParts } from './store-parts.ts';

/**
 * A worker's page statements sent one behind the other on one connection in pipeline mode (docs/design.md#the-run-host):
 * the next page's statement goes while the one before is on its way, so the server works on one page while this
 * process makes the next. One connection, so the server runs them in the order sent, each its own transaction: a page
 * sent behind another of its series finds the series where that one left it, and one refused (the fence, a value)
 * leaves the series where it was, so that the pages of it behind are refused by the fence too (`SeriesLostError`).
 *
 * What cannot go down the pipeline waits for every page sent before it to settle, then goes its own way (`serial`):
 * a page that ends its series (a transaction: its statement, then its job completed, on a connection of the pool's),
 * and every page once one failed — the connection (retries find out whether a statement whose answer was lost
 * landed, in the order sent), or a page refused (committed again emptied, or lost, after those before it) — each
 * page then goes as before, one at a time, after the one before.
 *
 * After a failure that stops the run, a page already sent whose answer was lost (the connection cut) is not committed
 * again, but whether it landed is asked once (`landed`): one that did is committed, not paid-and-not-committed, so
 * that its answer is counted once in the spend ledger (docs/design.md#the-run-host).
 */
export function commitPipeline(parts: StoreParts) {
  let client: pg.Client | undefined;
  let connected: Promise<unknown> | undefined;
  // The connection's session on the server, known before any page is sent on it; once the connection is cut, it is
  // ended (once) before a page sent on it is asked after or sent again (`postgres/sessions.ts`).
  let session: ServerSession | undefined;
  let ending: Promise<void> | undefined;
  const ended = (): Promise<void> => (ending ??= session ? endSession(parts, session) : Promise.resolve());
  // Once a page failed (the connection, or refused), no page goes down the pipeline again in this run: a page sent
  // behind one being retried or committed again could land before it.
  let broken = false;
  // A failure that stops the run (neither a refusal nor a passing one of the connection's): the pages behind it fail
  // with it at their turn, as the pages behind a failed one did when each waited for the one before, rather than each
  // waiting out the server again (WEBDATA_POSTGRES_RETRY_MS apiece).
  let fatal: { error: unknown } | undefined;
  // Settles once every page handed over so far has (either way): what goes its own way waits for it.
  let settled: Promise<void> = Promise.resolve();
  const inTurn = <T>(serial: () => Promise<T>) => () => {
    if (fatal) throw fatal.error;
    return serial();
  };
  // A page sent down the pipeline whose answer was lost, behind a failure that stops the run: it is committed if it
  // landed (asked once: the run is stopping, the server is not waited out again), and fails with the run otherwise —
  // also when the question cannot be answered, as a page whose answer was lost did one page at a time.
  const landedBefore = async <T>(failure: unknown, landed: () => Promise<T | undefined>): Promise<T> => {
    const result = await landed().catch(() => undefined);
    if (result === undefined) throw failure;
    return result;
  };
  const open = (): pg.Client => {
    if (client) return client;
    const opened = openPipelinedClient(parts.target);
    // A connection cut (a restart) is reported on the client: heard here, the statements on it fail, and are retried.
    opened.on('error', () => {
      broken = true;
    });
    connected = opened.connect().then(async () => {
      session = await sessionOf(opened);
    });
    client = opened;
    return opened;
  };
  return {
    /**
     * Commits one page: down the pipeline with `pipelined` (given the connection), or `serial` once the pages before
     * it have settled; a pipelined page that fails as a connection fails is committed `serial`ly after the pages
     * before it. Resolves or rejects as the page's commit did.
     */
    commit<T>(alone: boolean, pipelined: (db: pg.Client) => Promise<T>, serial: () => Promise<T>, landed: () => Promise<T | undefined>): Promise<T> {
      const before = settled;
      let done: Promise<T>;
      if (alone || broken) done = before.then(inTurn(serial));
      else {
        const db = open();
        done = (connected as Promise<unknown>)
          .then(() => pipelined(db))
          .catch(async (error: unknown) => {
            // Said as the database's, as a page committed on the pool is (`retrying`): a full disk, a statement past
            // its time limit (exit 75, to run again). A refused value or a fence's refusal is passed on as it is.
            if (!isTransient(error)) throw explainPostgresFailure(error, parts.where);
            broken = true;
            await before;
            // Nothing of the cut session can land any more, or the page fails: asked after or sent again, it could
            // land twice (a page taken for another worker's, its answer counted twice).
            const unended = await ended().then(
              () => undefined,
              (failure: unknown) => ({ failure }),
            );
            if (fatal) {
              if (unended) throw fatal.error;
              return landedBefore(fatal.error, landed);
            }
            if (unended) throw unended.failure;
            return serial();
          });
      }
      done = done.catch((error: unknown) => {
        // After a page that failed, whatever the reason, each page goes after the one before has settled: one refused
        // (a value, the fence) is committed again emptied, or the run stops, and a page of its series sent behind it
        // must find out first (refused by the fence), not land before it.
        broken = true;
        if (!(error instanceof SeriesLostError) && !isRefusedValue(error)) fatal ??= { error };
        throw error;
      });
      settled = done.then(
        () => undefined,
        () => undefined,
      );
      return done;
    },
    /** Once the pages handed over have settled, the connection is closed. */
    async close(): Promise<void> {
      await settled;
      const closing = client;
      client = undefined;
      connected = undefined;
      await closing?.end().catch(() => undefined);
    },
  };
}

export type CommitPipeline = ReturnType<typeof commitPipeline>;
