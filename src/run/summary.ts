import { z } from 'zod';
import { refreshExplanationSchema } from './refresh-summary.ts';

export const RUN_STATUSES = ['completed', 'budget', 'allowance', 'failed_series', 'stopped', 'interrupted'] as const;

const counts = z.record(z.string(), z.int());

/** One key of a pool in the summary. */
export const keySummarySchema = z.object({
  label: z.string(),
  requests: z.int(),
  credits: z.number(),
  /** Its 429s. */
  rateLimited: z.int(),
  /** Requests a second it was paced to when the run ended (this invocation's); null: unpaced (no rate set or learned). */
  rate: z.number().nullable(),
  /** The limit it learned from its own answers (requests a second); null: none taught it. */
  learnedLimit: z.number().nullable(),
  /** Retired for the run (`path` null: a 401) or for an endpoint (a 402, a 403): why, and when (ISO 8601). */
  retired: z.object({ reason: z.string(), message: z.string(), at: z.string(), path: z.string().nullable() }).nullable(),
});

export type KeySummary = z.infer<typeof keySummarySchema>;

/** What a run did: returned by `run()`, stored in the `runs` table, printed by the command line. */
export const runSummarySchema = z.object({
  runId: z.string(),
  pipeline: z.string(),
  /**
   * `completed`: every series ended by a stop rule; `budget`: some stopped on the budget; `allowance`: the keys'
   * allowances are spent for their periods (it resumes in the next, `resumeAt`); `failed_series`: some failed;
   * `stopped`: 401, 402/403, a quota or a stall (see `reason`); `interrupted`: a signal, or (`reason: 'presumed_dead'`) a distributed run's worker the others presumed dead.
   */
  status: z.enum(RUN_STATUSES),
  reason: z.string().optional(),
  message: z.string().optional(),
  /** For a quota: when to resume; for allowances, when the first key's next period begins. */
  resumeAt: z.string().optional(),
  /**
   * Status `allowance` (docs/credits.md#allowances): each key whose allowance stopped the run, by its label — the period
   * spent (`2026-11-27`, `2026-11`), and when the next opens (ISO 8601; null: not in this run, its share spent) in its
   * time zone.
   */
  allowance: z.array(z.object({ key: z.string(), period: z.string(), opensAt: z.string().nullable(), timezone: z.string() })).optional(),
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
    /**
     * Series the refresh plan did not fetch (`refresh.priority: 'changes'`: docs/pipelines.md#the-refresh-planner): not
     * complete, not failed, not stopped, and in none of the counts above. Absent without a plan.
     */
    skipped: z.int().optional(),
  }),
  /** The refresh plan (`refresh.priority: 'changes'`): its budget in pages, the pages expected and spent, the series chosen and skipped by reason. */
  refresh: refreshExplanationSchema.optional(),
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
  /**
   * A pool of keys (docs/pipelines.md#the-run-summary): each key by its label (never the key), across the run's
   * invocations — its requests, credits, 429s, the rate it ran at and the limit it learned at the end, and whether,
   * when and why it was retired. Absent for a run with one key (its figures are the run's) and in summaries from before
   * pools.
   */
  keys: z.array(keySummarySchema).optional(),
  /** A distributed run: this worker's share of it (the rest of the summary is the whole run's). */
  worker: z.object({ id: z.string(), host: z.string(), pid: z.int(), pages: z.int(), credits: z.number() }).optional(),
});

export type RunSummary = z.infer<typeof runSummarySchema>;
export type RunStatus = RunSummary['status'];
