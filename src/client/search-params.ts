import { z } from 'zod';
import { type CodeAllowance, checkCountry, checkLang } from './codes.ts';
import { ValidationError } from './errors.ts';

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
 * The search endpoint's parameters. Everything a server would answer with a 400 is refused here,
 * so that no request (and no credit) is spent on it.
 */
export function searchParamsSchema(allow: CodeAllowance = {}) {
  return z.strictObject({
    q: z
      .string({ error: 'must be a string: the search query' })
      .trim()
      .min(1, { error: 'must not be empty or only spaces: it is the search query' }),
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

export function parseSearchParams(params: unknown, allow: CodeAllowance = {}): ValidSearchParams {
  const schema = allow.extraCountries?.length || allow.extraLangs?.length ? searchParamsSchema(allow) : defaultSchema;
  return ValidationError.parse(schema, params, 'Invalid search parameters (nothing was sent)');
}
