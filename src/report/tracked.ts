import type { Reader } from '../analytics/reader.ts';
import { filterClause } from '../analytics/filter.ts';
import { viewName } from '../analytics/views.ts';
import { finite, text } from './read-values.ts';
import { reportStatements as sql } from './statements.ts';
import { escapeXml } from './svg.ts';

/** Rows of the tracked-domains table shown at the most. */
const MAX_TRACKED = 200;

/** A tracked domain in the latest run of its series (docs/pipelines.md#tracked-domains-and-depth-until-found). */
export interface TrackedLine {
  query: string;
  country: string;
  lang: string;
  domain: string;
  /** The rank, or "not found within N". */
  position: string;
  runId: string;
  /** Runs recorded since that run (a series the refresh plan skipped keeps its last rank); undefined: not known. */
  age: number | undefined;
}

/**
 * The tracked domains of each series' latest fetched run, with their age, from `report_tracked_latest`; from
 * `report_tracked`, without it, in a database no run of this webdata-etl has opened since (none: the table tracks no
 * domains).
 */
export async function readTracked(reader: Reader, filter: { table: string; query?: string | undefined; country?: string | undefined }): Promise<TrackedLine[]> {
  const view = viewName(filter.table, 'tracked');
  const latest = viewName(filter.table, 'tracked_latest');
  const where = filterClause(filter);
  let rows: Record<string, unknown>[];
  if (await reader.exists(latest)) rows = await reader.all(sql.trackedLatest(reader.name(latest), where.sql, reader.dialect), [...where.params, MAX_TRACKED]);
  else if (await reader.exists(view)) rows = await reader.all(sql.tracked(reader.name(view), where.sql, reader.dialect), [...where.params, MAX_TRACKED]);
  else return [];
  return rows.map((row) => ({
    query: text(row.query),
    country: text(row.country),
    lang: text(row.lang),
    domain: text(row.domain),
    position: finite(row.rank) !== undefined ? `#${finite(row.rank)}` : `not found within ${finite(row.searched) ?? 0}`,
    runId: text(row.run_id),
    age: finite(row.age_runs),
  }));
}

/** How long ago a rank was fetched, in runs: "latest run", "1 run ago", "3 runs ago" ("–": not known). */
export function ageInRuns(age: number | undefined): string {
  if (age === undefined || age < 0) return '–';
  return age === 0 ? 'latest run' : age === 1 ? '1 run ago' : `${age} runs ago`;
}

/** The table of tracked domains, every cell escaped. */
export function trackedTable(lines: readonly TrackedLine[]): string {
  const rows = lines.map(
    (line) => `<tr>${[line.query, line.country || '–', line.lang || '–', line.domain, line.position, ageInRuns(line.age), line.runId].map((cell) => `<td>${escapeXml(cell)}</td>`).join('')}</tr>`,
  );
  return '<table><thead><tr><th>Query</th><th>Country</th><th>Lang</th><th>Domain</th><th>Rank</th><th>Fetched</th><th>Run</th></tr></thead>' + `<tbody>${rows.join('')}</tbody></table>`;
}
