import { z } from 'zod';
import { type AllowedCodes, checkCountry, checkLang } from './codes.ts';
import { ValidationError } from '../errors/validation-error.ts';

const positiveInt = (what: string) =>
  z.int({ error: `must be a positive integer (${what})` }).positive({ error: `must be a positive integer (${what})` });

/** A country or language code: any case accepted, lower case sent (the contract asks for lower case). */
const code = (check: (value: string) => string | null) =>
  z
    .string({ error: 'must be a string' })
    .trim()
    .toLowerCase()
    .check((ctx) => {
      const problem = check(ctx.value);
      if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
    });

/**
 * The longest query sent, in characters (Unicode code points, counted after trimming). The contract states no limit;
 * 2,048 is already about the longest URL that clients and servers commonly take, so a longer query is a mistake in
 * the input (a whole file in one cell, say) that would at best cost a request and at worst fail every page of its series.
 */
export const MAX_QUERY_CHARACTERS = 2048;

/** Characters as people count them: Unicode code points (an emoji is one, not two UTF-16 units). */
export function characterCount(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

/** Why a query (trimmed) is too long to send, or null. Counted only when its UTF-16 length leaves doubt. */
export function queryLengthProblem(query: string): string | null {
  if (query.length <= MAX_QUERY_CHARACTERS) return null;
  const count = characterCount(query);
  if (count <= MAX_QUERY_CHARACTERS) return null;
  return `is ${count.toLocaleString('en-US')} characters long; the most is ${MAX_QUERY_CHARACTERS.toLocaleString('en-US')} (Unicode characters, counted after trimming)`;
}

/**
 * The search endpoint's parameters. Everything a server would answer with a 400 is refused here,
 * so that no request (and no credit) is spent on it.
 */
export function searchParamsSchema(allow: AllowedCodes = {}) {
  return z.strictObject({
    q: z
      .string({ error: 'must be a string: the search query' })
      .trim()
      .min(1, { error: 'must not be empty or only spaces: it is the search query' })
      .check((ctx) => {
        const problem = queryLengthProblem(ctx.value);
        if (problem) ctx.issues.push({ code: 'custom', message: problem, input: ctx.value });
      }),
    page: positiveInt('1 is the first page').optional(),
    count: positiveInt('the number of results wanted').optional(),
    country: code((value) => checkCountry(value, allow)).optional(),
    lang: code((value) => checkLang(value, allow)).optional(),
  });
}

const defaultSchema = searchParamsSchema();

/** What a caller passes to `client.search()`. */
export type SearchParams = z.input<typeof defaultSchema>;
/** The same after validation: trimmed, lower-cased. */
export type ValidSearchParams = z.output<typeof defaultSchema>;

export function parseSearchParams(params: unknown, allow: AllowedCodes = {}): ValidSearchParams {
  const schema = allow.extraCountries?.length || allow.extraLangs?.length ? searchParamsSchema(allow) : defaultSchema;
  return ValidationError.parse(schema, params, 'Invalid search parameters (nothing was sent)');
}
