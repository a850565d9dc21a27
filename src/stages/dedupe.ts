import { z } from 'zod';
import { ValidationError } from '../client/errors.ts';
import type { Stage } from '../pipeline/compose.ts';
import { canonicalUrl } from './canonical-url.ts';
import { toJson } from './json.ts';

type Keyed = { readonly [field: string]: unknown };

export const dedupeOptionsSchema = z.strictObject({
  /**
   * `url` (the canonical URL: `dedupe_key` of normalized items), a list of fields whose values together make the
   * key, or a function returning the key (null: never merged).
   */
  key: z
    .union([
      z.literal('url'),
      z.array(z.string().min(1)).min(1, { error: 'must name at least one field' }),
      z.custom<(item: Keyed) => string | null | undefined>((v) => typeof v === 'function'),
    ])
    .default('url'),
  /** Where a key counts as seen: within the series (query × country × lang). Wider scopes arrive with the state store. */
  scope: z.literal('series', { error: 'must be "series" (the scopes "query" and "global" are not available yet)' }).default('series'),
});

export type DedupeOptions = z.input<typeof dedupeOptionsSchema>;

/**
 * Drops items whose key was already seen in the scope, and counts new and duplicate items per page
 * (`page.meta.dedupe`). Items without a key are kept: they cannot be told apart, so they are never merged.
 */
export function dedupe<I extends Keyed>(options: DedupeOptions = {}): Stage<I, I> {
  const keyOf = keyFunction(ValidationError.parse(dedupeOptionsSchema, options, 'Invalid dedupe options', 'dedupe').key);
  return async function* dedupeStage(pages, ctx) {
    for await (const page of pages) {
      const seen = ctx.seriesState<Record<string, 1>>('dedupe', page.series, () => Object.create(null));
      let duplicates = 0;
      const items = page.items.filter((item) => {
        const key = keyOf(item);
        if (key === null || key === undefined) return true;
        if (seen[key] === 1) {
          duplicates += 1;
          return false;
        }
        seen[key] = 1;
        return true;
      });
      yield { ...page, items, meta: { ...page.meta, dedupe: { new: items.length, duplicates } } };
    }
  };
}

function keyFunction(key: z.output<typeof dedupeOptionsSchema>['key']): (item: Keyed) => string | null | undefined {
  if (typeof key === 'function') return key;
  if (key === 'url') {
    return (item) => {
      if (typeof item.dedupe_key === 'string' || item.dedupe_key === null) return item.dedupe_key;
      // Items that did not go through normalize(): the canonical form of their URL field.
      const url = item.url ?? item.link ?? item.href;
      return typeof url === 'string' ? canonicalUrl(url) : null;
    };
  }
  return (item) => {
    const values = key.map((field) => item[field]);
    return values.every((v) => v === undefined || v === null) ? null : toJson(values);
  };
}
