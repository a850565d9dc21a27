import type { Dialect } from '../analytics/dialect.ts';

/*
 * Every statement the digest of a run's end sends (digest.ts), by name, as pure SQL of the relations it reads (the
 * pg-boss `plans.ts` way). The names come quoted by sql-identifier.ts (and qualified by their schema in PostgreSQL);
 * values are always bound (`?`).
 */

/**
 * The digest's statements, over a results table `t` and its changes view `v` (both quoted, qualified if need be), in
 * either dialect; values are bound (`?`).
 */
export const digestStatements = {
  /** The run the view takes for the latest (the greatest run id) and the one before it, which it compares with. */
  runs: (t: string, d: Dialect) =>
    `SELECT (SELECT MAX(${d.bytes('run_id')}) FROM ${t}) AS latest, (SELECT MAX(${d.bytes('run_id')}) FROM ${t} WHERE ${d.bytes('run_id')} < ?) AS before`,
  /**
   * One pass over the view's rows of the run (those comparing it: a series the run skipped keeps its last comparison
   * there, an earlier run's, which is no news of this one): each row sorted into entered, left or moved (or none),
   * numbered within its list and counted, and the first of each list kept. Parameters: top ×6, minRankMove, the run,
   * the URL's and title's lengths, the limit.
   */
  changes: (v: string, d: Dialect) => `
    WITH sorted AS (
      SELECT query, country, lang, url, title, previous_rank, current_rank,
        CASE
          WHEN change IN ('new', 'up') AND current_rank <= ? AND (previous_rank IS NULL OR previous_rank > ?) THEN 'entered'
          WHEN change IN ('lost', 'down') AND previous_rank <= ? AND (current_rank IS NULL OR current_rank > ?) THEN 'left'
          WHEN change IN ('up', 'down') AND current_rank <= ? AND previous_rank <= ? AND ABS(rank_delta) >= ? THEN 'moved'
        END AS kind
      FROM ${v} WHERE ${d.bytes('run_id')} = ?),
    numbered AS (
      SELECT query, country, lang, SUBSTR(url, 1, ?) AS url, SUBSTR(title, 1, ?) AS title, previous_rank, current_rank, kind,
        ROW_NUMBER() OVER (PARTITION BY kind ORDER BY ${d.bytes('query')}, ${d.bytes('country')}, ${d.bytes('lang')}, COALESCE(current_rank, previous_rank), ${d.bytes('url')}) AS n,
        ${d.int('COUNT(*) OVER (PARTITION BY kind)')} AS total
      FROM sorted WHERE kind IS NOT NULL)
    SELECT query, country, lang, url, title, previous_rank, current_rank, kind, total FROM numbered WHERE n <= ? ORDER BY kind, n`,
};
