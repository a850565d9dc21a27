import { UNFINISHED_SQL } from './interfaces.ts';
import type { PruneKind } from './prune.ts';

/**
 * The rows of each kind a prune removes (`prune.ts`), as a table and a condition, in either store's dialect: `prefix`
 * qualifies the tables (PostgreSQL's schema and a dot, '' in SQLite), `p` names the parameters (one run's id, its
 * pipeline, and for spend the instant before which its rows go). Names in them are ours, never a user's.
 */
export function prunePredicates(prefix: string, p: { run: string; pipeline: string; before: string }): Record<PruneKind, { table: string; where: string }> {
  const t = (table: string) => `${prefix}${table}`;
  const ofRun = (table: string) => ({ table: t(table), where: `run_id = ${p.run}` });
  return {
    series: ofRun('series'),
    series_state: ofRun('series_state'),
    // The run's journal entries: removed only once a later run ended cleanly (prune.ts), every sink holding them.
    journal: ofRun('pages'),
    run_sinks: ofRun('run_sinks'),
    sightings: ofRun('sightings'),
    // Delivered or given up: a pending notification is still owed.
    notifications: { table: t('notifications'), where: `run_id = ${p.run} AND status IN ('delivered', 'failed')` },
    // Never the pipeline's latest occurrence: a worker reads the schedule on from it.
    occurrences: {
      table: t('occurrences'),
      where: `run_id = ${p.run} AND pipeline = ${p.pipeline} AND due_at < (SELECT MAX(due_at) FROM ${t('occurrences')} WHERE pipeline = ${p.pipeline})`,
    },
    workers: ofRun('workers'),
    run_limits: ofRun('run_limits'),
    run_key_limits: ofRun('run_key_limits'),
    // Checked again as it goes: a run resumed meanwhile is kept.
    runs: { table: t('runs'), where: `run_id = ${p.run} AND status NOT IN (${UNFINISHED_SQL})` },
    // The pipeline's ledger rows written before the cut, but never a run's that may still resume (its budget counts them).
    spend: {
      table: t('spend'),
      where: `at < ${p.before} AND (pipeline = ${p.pipeline} OR (pipeline IS NULL AND run_id IN (SELECT run_id FROM ${t('runs')} WHERE pipeline = ${p.pipeline})))
        AND run_id NOT IN (SELECT run_id FROM ${t('runs')} WHERE status IN (${UNFINISHED_SQL}))`,
    },
  };
}
