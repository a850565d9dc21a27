import { z } from 'zod';

// The digest's shape, apart from how it is read (digest.ts, with the database reads it takes): a webhook receiver's
// schemas (webdata-etl/notifications) load this and zod, not the analytics and the PostgreSQL driver beside the reads.

const entrySchema = z.object({
  url: z.string().nullable(),
  title: z.string().nullable(),
  /** This run's rank; null: no longer served (left). */
  rank: z.int().nullable(),
  /** The rank in the run compared with; null: not served then (entered). */
  previousRank: z.int().nullable(),
});

const seriesChangesSchema = z.object({
  query: z.string(),
  country: z.string(),
  lang: z.string(),
  /** URLs now in the top N that were not before (new, or up from below it). */
  entered: z.array(entrySchema),
  /** URLs in the top N before that are not now (gone, or down below it). */
  left: z.array(entrySchema),
  /** URLs in the top N both times that moved at least `minRankMove` places. */
  moved: z.array(entrySchema),
});

const failedSeriesSchema = z.object({
  endpoint: z.string(),
  query: z.string(),
  country: z.string(),
  lang: z.string(),
  /** The class of its last error: bad_request, server, network, rate_limited, … */
  errorKind: z.string().nullable(),
  error: z.string().nullable(),
});

const listCounts = z.object({ entered: z.int(), left: z.int(), moved: z.int(), failedSeries: z.int() });

/** What changed since the run before, as a notification carries it (docs/notifications.md#the-digest). */
export const digestSchema = z.object({
  /** The results table compared (its `changes` view); null when the pipeline has none with that view. */
  table: z.string().nullable(),
  /** The run compared with: the one before this run in that table; null when there is none. */
  since: z.string().nullable(),
  top: z.int(),
  minRankMove: z.int(),
  /** Changes by query, country and language, in that order; only series with a change. */
  series: z.array(seriesChangesSchema),
  /** This run's series that failed (a failed series has no rows to compare: its URLs are not "left"). */
  failedSeries: z.array(failedSeriesSchema),
  /** How many of each there are in all… */
  counts: listCounts,
  /** …and how many of them are not listed, past DIGEST_LIST_LIMIT per list. */
  omitted: listCounts,
  /** Why a part is missing or empty: no table with a changes view, the first run, a digest that failed. */
  notes: z.array(z.string()),
});

export type Digest = z.infer<typeof digestSchema>;
export type DigestEntry = z.infer<typeof entrySchema>;
