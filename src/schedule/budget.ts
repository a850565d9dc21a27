import { z } from 'zod';

/**
 * A budget, in one shape from the command line (`--budget N`) and the pipeline (`budget: { maxCredits }`) to the
 * credit meter: the credits a run may spend in all, across its resumes. Reports (the summary, `runs`, events) show the
 * number.
 */
export const budgetSchema = z.strictObject({ maxCredits: z.number().nonnegative() });

export type Budget = z.output<typeof budgetSchema>;
