import { DEFAULT_COLUMNS, UPSERT_COLUMNS } from '../sinks/columns.ts';

/**
 * The tag columns of a query file (`category`, `priority`, …) in the views: the sinks add them to a results table with
 * the default columns, and `rankings` and `changes` carry them, so that a report can be read by them as `items` can.
 */

const NOT_TAGS = new Set([...DEFAULT_COLUMNS, ...UPSERT_COLUMNS].map((column) => column.toLowerCase()));

/** The columns `changes` makes itself: a tag of one of these names is `tag_<name>` there, as a query file's is in a table. */
const CHANGES_OWN = new Set(['previous_rank', 'current_rank', 'rank_delta', 'change', 'previous_run_id', 'reason']);

/** The column `rankings` makes itself (the runs since its rows' run): a tag of that name is `tag_age_runs` there. */
const RANKINGS_OWN = new Set(['age_runs']);

/** A tag column, and the name a view gives it. */
export interface ViewTag {
  readonly column: string;
  readonly as: string;
}

/**
 * A results table's tag columns, in its order: every column beyond the normalized item's and those upsert adds. Read
 * from the table, not the run's plan, so that a tag an earlier run's query file added stays in the views (the table
 * keeps its column).
 */
export function tagColumnsOf(columns: readonly string[]): string[] {
  return columns.filter((column) => !NOT_TAGS.has(column.toLowerCase()));
}

/** The tags as the `changes` view names them (see `CHANGES_OWN`); one whose new name is a tag too is left out. */
export function changesTags(tags: readonly string[]): ViewTag[] {
  return renamed(tags, CHANGES_OWN);
}

/** The tags as the `rankings` view names them (see `RANKINGS_OWN`), as `changesTags` does. */
export function rankingsTags(tags: readonly string[]): ViewTag[] {
  return renamed(tags, RANKINGS_OWN);
}

function renamed(tags: readonly string[], own: ReadonlySet<string>): ViewTag[] {
  const taken = new Set(tags.map((tag) => tag.toLowerCase()));
  return tags.flatMap((column) => {
    if (!own.has(column.toLowerCase())) return [{ column, as: column }];
    const as = `tag_${column}`;
    return taken.has(as.toLowerCase()) ? [] : [{ column, as }];
  });
}
