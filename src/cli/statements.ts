import { type Dialect, POSTGRES } from '../analytics/dialect.ts';

/*
 * Every statement the command line sends itself (`runs`: the state store's runs, occurrences and notifications, read
 * through a Reader), by name, as pure SQL of the tables it reads (the pg-boss `plans.ts` way); what the other commands
 * read goes through analytics/ and report/. The tables' names come quoted by sql-identifier.ts (a Reader's `name`,
 * qualified by the state's schema in PostgreSQL); every value is bound (`?`). `byPipeline`: one pipeline's rows
 * (`?`: its name), else every pipeline's.
 */

/** The columns `runs` shows: never `plan`, a run's whole stored plan (tens of MB for a million queries). */
const SHOWN = 'run_id, pipeline, status, started_at, finished_at, budget, summary, error, invocations';

/** A run's notifications, as `runs` shows them: never the body, never the webhook's query string (it is not stored). */
const NOTIFICATIONS = 'run_id, invocation, target, event, status, attempts, error, updated_at';

const ofPipeline = (byPipeline: boolean) => (byPipeline ? 'WHERE pipeline = ?' : '');

export const runsStatements = {
  /** The runs, oldest first; runs begun in the same instant in the order they were recorded. */
  runs: (runs: string, d: Dialect, byPipeline: boolean) =>
    `SELECT ${SHOWN} FROM ${runs} ${ofPipeline(byPipeline)} ORDER BY started_at, ${d === POSTGRES ? 'created' : 'rowid'}`,
  /** A schedule's occurrences, by their due time. */
  occurrences: (occurrences: string, byPipeline: boolean) =>
    `SELECT pipeline, due_at, outcome, run_id, worker, claimed_at, note FROM ${occurrences} ${ofPipeline(byPipeline)} ORDER BY due_at`,
  /** The notifications, in the order they were made. */
  notifications: (notifications: string, byPipeline: boolean) =>
    `SELECT ${NOTIFICATIONS} FROM ${notifications} ${ofPipeline(byPipeline)} ORDER BY invocation, created_at`,
};

/** What `status` reads itself (PostgreSQL, `$n` bound), beside the distributed run's figures (distributed/status.ts). */
export const statusStatements = {
  /** A run's stored summary, if not larger than $2 characters (a real one is a few KB): $1 the run. */
  summary: (runs: string) => `SELECT summary FROM ${runs} WHERE run_id = $1 AND length(summary) <= $2`,
};

/** What `spend` reads: webdata_spend's rows whole (analytics/statements.ts's `keySpendViewSql`), in no order (it sorts its lines). */
export const spendStatements = {
  rows: (view: string) =>
    `SELECT day, key_label, key_fingerprint, pipeline, run_id, requests, credits, allowance_credits, allowance_per, allowance_timezone, period, period_left FROM ${view}`,
};

/**
 * What `estimate` reads of a state database for the refresh plan of the next run (estimate-refresh.ts), in the order
 * the state stores read them (`RunStore.runs`, `progress`): `?` bound, names quoted by the Reader.
 */
export const estimateRefreshStatements = {
  /** A pipeline's runs, in the order they were recorded. */
  runs: (runs: string, d: Dialect) => `SELECT run_id, status FROM ${runs} WHERE pipeline = ? ORDER BY ${d === POSTGRES ? 'created' : 'rowid'}`,
  /** A series' row in a run. */
  series: (series: string) => `SELECT * FROM ${series} WHERE run_id = ? AND series_id = ?`,
  /** Its stage state's changes since the row's, in order. */
  stateChanges: (changes: string) => `SELECT changes FROM ${changes} WHERE run_id = ? AND series_id = ? ORDER BY seq`,
};
