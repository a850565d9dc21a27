import type { z } from 'zod';
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
  readonly issues: readonly ValidationIssue[];

  constructor(subject: string, issues: readonly ValidationIssue[]) {
    super(`${subject}:\n${issues.map((i) => `  - ${i.path || '(root)'}: ${i.message}`).join('\n')}`);
    this.name = 'ValidationError';
    this.issues = issues;
  }

  /**
   * Parses `input` with `schema`, or throws a ValidationError naming every bad field (under `pathPrefix`).
   * The one way every options object of the library is checked.
   */
  static parse<S extends z.ZodType>(schema: S, input: unknown, subject: string, pathPrefix = ''): z.output<S> {
    const result = schema.safeParse(input);
    if (!result.success) throw ValidationError.fromZod(subject, result.error, pathPrefix);
    return result.data;
  }

  /** Builds one from a zod error, keeping zod's messages (ours name what is valid; zod's never echo the value). */
  static fromZod(subject: string, error: z.ZodError, pathPrefix = ''): ValidationError {
    return new ValidationError(
      subject,
      error.issues.map((issue) => ({
        path: [pathPrefix, ...issue.path.map(String)].filter(Boolean).join('.'),
        message: issue.message,
      })),
    );
  }
}
