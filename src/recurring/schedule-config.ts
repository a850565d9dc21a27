import { Cron } from 'croner';
import { z } from 'zod';

/** A time zone the runtime knows (IANA names: `Europe/Berlin`, `UTC`). */
function knownTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** Whether croner takes the pattern; its own message when it does not. */
function cronProblem(pattern: string): string | undefined {
  try {
    new Cron(pattern, { paused: true });
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/**
 * When a pipeline's runs are due (docs/schedules.md): a cron pattern read in a time zone, and what becomes of the
 * occurrences missed while no worker was up — `once`, one catch-up run however many were missed (never a burst), or
 * `skip`, none.
 */
export const scheduleSchema = z.strictObject({
  /** Five fields (minute hour day month weekday) or six (seconds first), as cron has them; `@daily` and the like too. */
  cron: z.string().superRefine((pattern, ctx) => {
    const problem = cronProblem(pattern);
    if (problem) ctx.addIssue({ code: 'custom', message: `must be a cron pattern such as "0 6 * * *" (minute hour day month weekday): ${problem}` });
  }),
  /** The time zone the pattern is read in; default UTC. */
  timezone: z
    .string()
    .refine(knownTimeZone, { error: 'must be an IANA time zone such as "Europe/Berlin" or "UTC"' })
    .default('UTC'),
  missed: z.enum(['once', 'skip']).default('once'),
});

export type Schedule = z.output<typeof scheduleSchema>;
