import type { z } from 'zod';
import { closestName } from '../closest-name.ts';
import { WebDataEtlError } from './web-data-etl-error.ts';

export interface ValidationIssue {
  /** Dotted path of the offending field, e.g. `country` or `sinks.0.path`. */
  path: string;
  message: string;
}

/**
 * Bad input, caught before anything is sent (and so before any credit is spent).
 * Each issue names the field and what would be valid.
 */
export class ValidationError extends WebDataEtlError {
  /** What was being checked: `Invalid search source`, `Invalid pipeline "x"`. */
  readonly subject: string;
  readonly issues: readonly ValidationIssue[];

  constructor(subject: string, issues: readonly ValidationIssue[]) {
    super(`${subject}:\n${issues.map((i) => `  - ${i.path || '(root)'}: ${i.message}`).join('\n')}`);
    this.name = 'ValidationError';
    this.subject = subject;
    this.issues = issues;
  }

  /**
   * Parses `input` with `schema`, or throws a ValidationError naming every bad field (under `pathPrefix`).
   * The one way every options object of the library is checked.
   */
  static parse<S extends z.ZodType>(schema: S, input: unknown, subject: string, pathPrefix = ''): z.output<S> {
    const result = schema.safeParse(input, { error: unknownFieldMessage });
    if (!result.success) throw ValidationError.fromZod(subject, result.error, pathPrefix);
    return result.data;
  }

  /**
   * Runs every check, and returns what each returned; or throws once with the problems of all the checks that failed
   * (of one alone: its own error, as it is), so that they are fixed in one go rather than met one a run. An error
   * that is not a ValidationError is thrown as it comes.
   */
  static all<const T extends readonly (() => unknown)[]>(subject: string, checks: T): { -readonly [K in keyof T]: ReturnType<T[K]> } {
    const results: unknown[] = [];
    const failed: ValidationError[] = [];
    for (const check of checks) {
      try {
        results.push(check());
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        failed.push(error);
      }
    }
    if (failed.length > 0) throw ValidationError.combine(subject, failed);
    return results as { -readonly [K in keyof T]: ReturnType<T[K]> };
  }

  /** One error for several: the only one as it is, or all their problems under `subject`. */
  static combine(subject: string, errors: readonly ValidationError[]): ValidationError {
    const [only] = errors;
    if (errors.length === 1 && only !== undefined) return only;
    return new ValidationError(subject, errors.flatMap((error) => error.issues));
  }

  /** Builds one from a zod error, keeping zod's messages (ours name what is valid; zod's never echo the value). */
  static fromZod(subject: string, error: z.ZodError, pathPrefix = ''): ValidationError {
    return new ValidationError(
      subject,
      error.issues.map((issue) => ({
        // One unknown field is named by its own path: `search.maxPage`, not `search`.
        path: [pathPrefix, ...issue.path.map(String), ...(issue.code === 'unrecognized_keys' && issue.keys.length === 1 ? issue.keys : [])].filter(Boolean).join('.'),
        message: issue.message,
      })),
    );
  }
}

/**
 * zod's "Unrecognized key" as what to write instead: `unknown field; did you mean "maxPages"?`, or, with nothing near
 * it, the fields there are. The keys come from the object that refused them (`inst`, only an error map sees it).
 */
function unknownFieldMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== 'unrecognized_keys') return undefined;
  const shape = (issue.inst as { _zod?: { def?: { shape?: object } } } | undefined)?._zod?.def?.shape;
  const known = shape ? Object.keys(shape) : [];
  const hint = (key: string) => {
    const near = closestName(key, known);
    return near === undefined ? undefined : `did you mean "${near}"?`;
  };
  const [only] = issue.keys;
  if (issue.keys.length === 1 && only !== undefined) {
    return `unknown field; ${hint(only) ?? (known.length > 0 ? `the fields here are ${known.join(', ')}` : 'remove it')}`;
  }
  return `unknown fields ${issue.keys.map((key) => `"${clipped(key)}"${hint(key) ? ` (${hint(key)})` : ''}`).join(', ')}${known.length > 0 ? `; the fields here are ${known.join(', ')}` : ''}`;
}

/** A key can be anything a file holds: a readable part of it. */
function clipped(key: string): string {
  return key.length > 40 ? `${key.slice(0, 40)}…` : key;
}
