import { z } from 'zod';
import type { Item } from '../client/client.ts';

/**
 * The normalized search item (docs/design.md#the-normalized-item): one row per item served, in SQLite and CSV. The
 * schema is the single definition of the columns: their names, order and nullability.
 */
export const normalizedItemSchema = z.object({
  run_id: z.string(),
  query: z.string(),
  /** '' when no country was sent. */
  country: z.string(),
  /** '' when no language was sent. */
  lang: z.string(),
  /** The page number as requested. */
  page: z.int(),
  /** 1-based index of the item on its page, as served. */
  position: z.int(),
  /** 1-based order of first appearance among the series' distinct items: a repeat keeps its first rank. */
  rank: z.int(),
  title: z.string().nullable(),
  /** As served. */
  url: z.string().nullable(),
  /** The URL's host, lower-cased. */
  domain: z.string().nullable(),
  snippet: z.string().nullable(),
  /** The canonical URL (or the configured key); null when the item has none, and then it is never merged. */
  dedupe_key: z.string().nullable(),
  /** When the page was answered (ISO 8601, UTC). */
  fetched_at: z.string(),
  /**
   * The item exactly as received, as the parsed value it is (the page's own reference: nothing is copied or written
   * out until a sink stores it, as JSON text or jsonb).
   */
  raw: z.custom<Item>((value) => typeof value === 'object' && value !== null),
});

type Inferred = z.infer<typeof normalizedItemSchema>;

/**
 * The row, inferred from the schema. Mapped here rather than aliased: the mapped type is made by this declaration and
 * keeps its name, so the compiler's messages say `NormalizedItem` where an alias of the inferred type printed all 14
 * fields (`Sink<NormalizedItem>` is not assignable to `Sink<Item>`). Unlike an interface, it is still a record of
 * fields to a stage or key function that takes any (`{ [field: string]: unknown }`, as `dedupe()` does).
 */
export type NormalizedItem = { [Column in keyof Inferred]: Inferred[Column] };

/** Column names in order. */
export const NORMALIZED_COLUMNS = Object.keys(normalizedItemSchema.shape) as (keyof NormalizedItem)[];
