/**
 * What an invocation of `webdata-etl worker` may take of the pipeline's runs (docs/schedules.md), where a plain
 * invocation takes whatever there is:
 * - `start`, the occurrence's claimant: a new run, or the resume of an unfinished one nobody is at; never the join of a
 *   run with workers at work (`RunAtWorkError`: the occurrence is skipped, not a second start of the run at work);
 * - `continue`, another worker of the fleet, or a worker starting again: run `runId` only, joined while it has workers
 *   at work, else resumed; when it is no longer the pipeline's unfinished run, nothing (`RunEndedError`), so that an
 *   occurrence never starts a second run after its own ended.
 */
export type RunTake = { kind: 'start' } | { kind: 'continue'; runId: string };
