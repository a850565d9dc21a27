import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { keepsItems, type SameItemsStage, type Stage } from '../pipeline/compose.ts';
import { canonicalUrl } from './canonical-url.ts';
import { toJson } from '../json.ts';
import { storedKey } from '../stored-key.ts';

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
  /**
   * Where a key counts as seen: `series` (query × country × lang, in memory), `query` (across countries and
   * langs of one query) or `global` (the whole pipeline). The wider scopes live in the state store and record every
   * place an item was seen in the `sightings` table.
   */
  scope: z.enum(['series', 'query', 'global'], { error: 'must be "series", "query" or "global"' }).default('series'),
  /** Remember keys across runs: each run keeps only what no earlier run had (incremental collection). */
  persistent: z.boolean().default(false),
});

export type DedupeOptions = z.input<typeof dedupeOptionsSchema>;

/**
 * Drops items whose key was already seen in the scope, and counts new and duplicate items per page
 * (`page.meta.dedupe`). Items without a key are kept: they cannot be told apart, so they are never merged.
 */
export function dedupe(options: DedupeOptions = {}): SameItemsStage<Keyed> {
  const config = ValidationError.parse(dedupeOptionsSchema, options, 'Invalid dedupe options', 'dedupe');
  const keyOf = keyFunction(config.key);
  const wide = config.scope !== 'series' || config.persistent;
  const dedupeStage: Stage<Keyed, Keyed> = async function* (pages, ctx) {
    const store = wide ? ctx.seenKeys?.(!config.persistent) : undefined;
    if (wide && !store) {
      throw new ValidationError('Invalid dedupe options', [
        {
          path: config.persistent ? 'dedupe.persistent' : 'dedupe.scope',
          message: `${config.persistent ? 'persistent dedupe' : `scope "${config.scope}"`} needs the run's state store, which only run() gives: run the pipeline with run() or webdata-etl run, or dedupe by series`,
        },
      ]);
    }
    for await (const page of pages) {
      const { series } = page;
      // Scopes, like keys, are stored and indexed: bounded (a scope by query holds the query).
      const scope = storedKey(`${config.persistent ? 'persistent' : 'run'}|${config.scope === 'global' ? '*' : config.scope === 'query' ? `${series.endpoint}|${series.query}` : series.id}`);
      const seen = store ? undefined : ctx.seriesState<Record<string, 1>>('dedupe', series, () => Object.create(null));
      let duplicates = 0;
      // Keys are stored and indexed: bounded as every stored key is (a long URL, a key of the user's).
      const keys = page.items.map((item) => {
        const key = keyOf(item);
        return typeof key === 'string' ? storedKey(key) : key;
      });
      // The scope's keys are looked up once per page (a network store answers a page's keys in one query); keys
      // repeated within the page are caught as they are added.
      const before = store ? await store.seen(scope, keys.filter((key) => typeof key === 'string')) : undefined;
      const added = new Set<string>();
      const items = page.items.filter((item, index) => {
        const key = keys[index];
        if (key === null || key === undefined) return true;
        const isNew = before ? !before.has(key) && !added.has(key) : seen?.[key] !== 1;
        if (store) {
          // Every place the item was seen, new to the scope or not: rows are never rewritten to say so.
          store.sighting({
            key,
            query: series.query,
            country: series.country,
            lang: series.lang,
            page: page.number,
            position: typeof item.position === 'number' ? item.position : index + 1,
            rank: typeof item.rank === 'number' ? item.rank : null,
            fetchedAt: page.meta.fetchedAt,
            first: isNew,
          });
          if (isNew) {
            store.add(scope, key);
            added.add(key);
          }
        } else if (seen && isNew) seen[key] = 1;
        if (!isNew) duplicates += 1;
        return isNew;
      });
      yield { ...page, items, meta: { ...page.meta, dedupe: { new: items.length, duplicates } } };
    }
  };
  // The runner reads this to know whether each series' rows stay complete (for the analytics views).
  // A distributed run claims keys across workers through the rows' `dedupe_key` column: only the URL key is that column.
  // What decides its rows, for a run's terms (a key function by its name: its code cannot be compared).
  const key = typeof config.key === 'function' ? `function ${config.key.name || '(anonymous)'}` : config.key;
  const terms = { stage: 'dedupe', key, scope: config.scope, persistent: config.persistent };
  return keepsItems(Object.assign(dedupeStage, { dedupeScope: config.scope, dedupeByUrl: config.key === 'url', dedupeStored: wide, terms }));
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
