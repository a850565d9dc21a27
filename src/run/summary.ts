import { z } from 'zod';

export const RUN_STATUSES = ['completed', 'budget', 'failed_series', 'stopped', 'interrupted'] as const;

const counts = z.record(z.string(), z.int());

/** What a run did: returned by `run()`, stored in the `runs` table, printed by the command line. */
export const runSummarySchema = z.object({
  runId: z.string(),
  pipeline: z.string(),
  /**
   * `completed`: every series ended by a stop rule; `budget`: some stopped on the budget; `failed_series`: some
   * failed; `stopped`: 401, 402/403, a quota or a stall (see `reason`); `interrupted`: a signal.
   */
  status: z.enum(RUN_STATUSES),
  reason: z.string().optional(),
  message: z.string().optional(),
  /** For a quota: when to resume. */
  resumeAt: z.string().optional(),
  requests: z.object({ total: z.int(), byStatus: counts }),
  retries: z.int(),
  rateLimitedWaitMs: z.number(),
  credits: z.object({
    spent: z.number(),
    uncertain: z.number(),
    /** The part of `spent` whose answers' pages were never committed (a failed invocation): their pages are fetched again. */
    uncommitted: z.number(),
    budget: z.number().nullable(),
    byEndpoint: z.record(z.string(), z.number()),
  }),
  pages: z.object({ fetched: z.int() }),
  items: z.object({
    /** Items the API served on the pages fetched. */
    served: z.int(),
    /** Items that reached the sinks. */
    written: z.int(),
    /** Items dedupe removed as already seen. */
    duplicates: z.int(),
    /**
     * Items a stage removed that dedupe did not count (a filter of the user's): served = written + duplicates + dropped,
     * counted by series (none where a stage added items).
     */
    dropped: z.int(),
  }),
  series: z.object({
    total: z.int(),
    /** Ended by their own stop rules. */
    completed: z.int(),
    failed: z.int(),
    /** Failed series by the class of their last error: bad_request, rate_limited (the 429 retry budget spent), server, … */
    failedBy: counts,
    /** Reason → count, for the others: budget, forbidden, or the run's stop (unauthorized, quota, interrupted…). */
    stopped: counts,
    /** Reason → count, for every series that ended: empty, short, max_pages, repeat, no_new, budget, failed, forbidden. */
    byReason: counts,
  }),
  /** Where the key went (this invocation): the origin, who chose it, and what credentials. */
  destination: z.object({ origin: z.string(), from: z.string(), credentials: z.string() }),
  /**
   * Where the rows went, and how: `exactly_once` (a file or table this pipeline owns), or `at_least_once` (stdout, a
   * file shared with other pipelines: a page may come twice after a crash).
   */
  outputs: z.array(z.object({ kind: z.string(), path: z.string(), delivery: z.enum(['exactly_once', 'at_least_once']) })),
  startedAt: z.string(),
  finishedAt: z.string(),
  durationMs: z.number(),
  /** A distributed run: this worker's share of it (the rest of the summary is the whole run's). */
  worker: z.object({ id: z.string(), host: z.string(), pid: z.int(), pages: z.int(), credits: z.number() }).optional(),
});

export type RunSummary = z.infer<typeof runSummarySchema>;
export type RunStatus = RunSummary['status'];
