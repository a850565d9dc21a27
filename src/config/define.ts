import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { deferredProblems } from './deferred-problems.ts';
import type { AnyStage } from '../pipeline/compose.ts';
import type { CheckedStages, ItemsAfter } from '../pipeline/chain.ts';
import type { Sink } from '../sinks/sink.ts';
import type { Source } from '../sources/source.ts';
import { KEY_LABEL } from '../client/api-keys.ts';
import { allowanceSchema } from '../schedule/allowance.ts';
import { budgetSchema } from '../schedule/budget.ts';
import { timeoutMsSchema, userAgentSchema } from '../client/options.ts';
import { postgresNameSchema, postgresUrlSchema } from '../postgres/target.ts';
import { bossSchema } from '../distributed/boss.ts';
import { notifySchema } from '../notify/webhook-config.ts';
import { spreadWithoutSchedule } from '../recurring/allowance-share.ts';
import { scheduleSchema } from '../recurring/schedule-config.ts';
import { refreshSchema, trackSchema } from '../pipeline/tracked-domains.ts';
import { retentionProblems, retentionSchema } from '../state/retention.ts';
import { DEFAULT_MAX_AGE_RUNS } from '../refresh/plan.ts';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/**
 * The state schema's name leaves room for pg-boss's beside it, `<schema>_jobs`, which pg-boss takes up to 50 bytes
 * (so that the names it makes from it fit PostgreSQL's 63): a longer one failed a distributed run as it started.
 */
const MAX_STATE_SCHEMA = 50 - bossSchema('').length;

export const pipelineSchema = z.strictObject({
  /** Identifies the pipeline across runs: its history, its lease, its state. */
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, { error: 'must be 1–100 letters, digits, ".", "_" or "-", starting with a letter or digit' }),
  /** Where the API is. The key is never read from a pipeline: it comes from WEBDATA_API_KEY. */
  api: z
    .strictObject({
      baseUrl: z.string().optional(),
      timeoutMs: timeoutMsSchema.optional(),
      userAgent: userAgentSchema.optional(),
      extraCountries: z.array(z.string()).optional(),
      extraLangs: z.array(z.string()).optional(),
    })
    .default({}),
  source: z.custom<Source<any>>((v) => isObject(v) && typeof v.plan === 'function' && typeof v.pages === 'function', {
    error: 'must be a source such as searchPages({ queries: [...] })',
  }),
  stages: z.array(z.custom<AnyStage>((v) => typeof v === 'function', { error: 'must be a stage: a function (pages, ctx) => AsyncIterable of pages' })).default([]),
  sinks: z
    .array(
      z.custom<Sink<any>>((v) => isObject(v) && typeof v.open === 'function' && isObject(v.commits) && typeof v.close === 'function', {
        error: 'must be a sink such as toSqlite({ path }) or toCsv({ path })',
      }),
    )
    .min(1, { error: 'needs at least one sink: toSqlite({ path }), toCsv({ path }), …' }),
  /** The plan's rate limit and how many requests may be in flight at once. */
  rate: z
    .strictObject({
      requestsPerSecond: z.number().positive().optional(),
      requests: z.int().positive().optional(),
      intervalMs: z.int().positive().optional(),
      concurrency: z.int().positive().default(4),
    })
    .refine((r) => (r.requests === undefined) === (r.intervalMs === undefined), { error: 'requests and intervalMs go together' })
    .refine((r) => !(r.requestsPerSecond !== undefined && r.requests !== undefined), { error: 'give requestsPerSecond or requests per intervalMs, not both' })
    .default({ concurrency: 4 }),
  /**
   * A pool of keys (WEBDATA_API_KEYS), per label: a key's own rate, concurrency and share of the credits where they
   * differ from `rate`'s (docs/pipelines.md#a-pool-of-keys). Settings only: keys come from the environment, never a file.
   */
  keys: z
    .record(
      z.string().regex(KEY_LABEL, { error: 'must be a key label: 1 to 32 of a-z, 0-9, _ and -' }),
      z.strictObject({
        requestsPerSecond: z.number().positive().optional(),
        concurrency: z.int().positive().optional(),
        /** The most credits this key may spend in the run (the run's `budget` caps all keys together). */
        maxCredits: z.number().nonnegative().optional(),
        /** This key's allowance, in place of the pipeline's `allowance` (docs/credits.md#allowances). */
        allowance: allowanceSchema.optional(),
      }),
    )
    .optional(),
  /** The most credits the run may spend, across all its resumes. */
  budget: budgetSchema.optional(),
  /**
   * The credits each key the run sends with may spend a day or a month, whatever pipeline spends them: recorded in the
   * state database by the key's fingerprint, binding every pipeline that shares it (docs/credits.md#allowances).
   */
  allowance: allowanceSchema.optional(),
  /** When `webdata-etl worker` runs it (docs/schedules.md); a pipeline without one runs when started. */
  schedule: scheduleSchema.optional(),
  /** Credits per request by endpoint path (the contract shows none; default 1). */
  credits: z.strictObject({ weights: z.record(z.string(), z.number().nonnegative()).default({}) }).default({ weights: {} }),
  /** 5xx, network errors, timeouts: attempts per request and backoff (see the scheduler). */
  retry: z.strictObject({ attempts: z.int().positive().optional(), baseDelayMs: z.int().nonnegative().optional(), maxDelayMs: z.int().nonnegative().optional() }).optional(),
  /** 429s: retries per request, pauses without Retry-After, the quota threshold and the stall breaker (see the scheduler). */
  rateLimit: z
    .strictObject({
      retries: z.int().nonnegative().optional(),
      baseDelayMs: z.int().nonnegative().optional(),
      maxDelayMs: z.int().nonnegative().optional(),
      maxRetryAfterMs: z.int().nonnegative().optional(),
      stallAfterMs: z.int().nonnegative().optional(),
    })
    .optional(),
  state: z
    .strictObject({
      /** Where the run state lives; default: the first SQLite sink's file, else `<name>.state.sqlite` beside the first sink not of your own (`defineSink`), else in the working directory. */
      path: z.string().min(1).optional(),
      /** A PostgreSQL database for the run state instead of a SQLite file (no password in it: PGPASSWORD, ~/.pgpass). */
      url: postgresUrlSchema.optional(),
      /** The PostgreSQL schema of the state tables, created when missing; a distributed run's queues go in `<schema>_jobs`. */
      schema: postgresNameSchema
        .max(MAX_STATE_SCHEMA, { error: `must be at most ${MAX_STATE_SCHEMA} characters: a distributed run keeps its queues in the schema ${bossSchema('<schema>')}, which pg-boss takes up to 50` })
        .default('webdata'),
      /** `prune` drops a journal entry once every sink holds its page; `keep` keeps them all (with the raw answers). */
      journal: z.enum(['prune', 'keep']).default('prune'),
    })
    .refine((state) => state.path === undefined || state.url === undefined, { error: 'give state.path (a SQLite file) or state.url (PostgreSQL), not both' })
    .default({ journal: 'prune', schema: 'webdata' }),
  /**
   * Who hears of a run's end: webhooks, each POSTed the summary and a digest of what changed, signed with
   * WEBDATA_WEBHOOK_SECRET (docs/notifications.md).
   */
  notify: notifySchema.optional(),
  /** Domains whose best rank each series keeps, for every query or per query from a column (docs/pipelines.md#tracked-domains-and-depth-until-found). */
  track: trackSchema.optional(),
  /** How deep each series is fetched: in full, or until its tracked domains are found (plus a margin). */
  refresh: refreshSchema.optional(),
  /** How long its records are kept in the state store, removed by `webdata-etl prune` (docs/pipelines.md#retention). */
  retention: retentionSchema.optional(),
}).superRefine((settings, ctx) => {
  // A share of an allowance is counted in the schedule's occurrences (docs/credits.md#spreading-an-allowance).
  for (const issue of spreadWithoutSchedule(settings)) ctx.addIssue({ code: 'custom', ...issue });
  // An allowance is counted from the spend ledger: its retention may not be shorter than the allowance needs.
  for (const issue of retentionProblems(settings)) ctx.addIssue({ code: 'custom', ...issue });
  if (settings.refresh?.depth === 'until-found' && settings.track === undefined) {
    ctx.addIssue({ code: 'custom', path: ['refresh', 'depth'], message: '"until-found" needs tracked domains: track: { domains: ["example.com"] } or track: { column: "…" }' });
  }
  // Moves are of tracked ranks: without them a series' history says nothing of how often it changes.
  if (settings.refresh?.priority === 'changes' && settings.track === undefined) {
    ctx.addIssue({ code: 'custom', path: ['refresh', 'priority'], message: '"changes" needs tracked domains (a move is a tracked domain\'s rank changing): track: { domains: ["example.com"] } or track: { column: "…" }' });
  }
  // The planner reads each series' history from the runs kept: pruned sooner, a series' last fetch would be forgotten.
  const keptRuns = settings.retention?.runs;
  const maxAgeRuns = settings.refresh?.maxAgeRuns ?? DEFAULT_MAX_AGE_RUNS;
  if (settings.refresh?.priority === 'changes' && keptRuns !== undefined && keptRuns <= maxAgeRuns) {
    ctx.addIssue({
      code: 'custom',
      path: ['retention', 'runs'],
      message: `must be at least ${maxAgeRuns + 1} with the refresh planner's maxAgeRuns ${maxAgeRuns}: its history is the runs kept, and each series' last fetch must stay among them (more runs teach it more)`,
    });
  }
  if (settings.refresh?.maxAgeRuns !== undefined && settings.refresh.priority === undefined) {
    ctx.addIssue({ code: 'custom', path: ['refresh', 'maxAgeRuns'], message: 'is the refresh planner\'s promise: it needs priority: "changes" (without it every series is fetched every run)' });
  }
});

/** A pipeline's settings: everything but its source, stages and sinks, whose types flow from one to the next. */
type Settings = Omit<z.input<typeof pipelineSchema>, 'source' | 'stages' | 'sinks'>;

/**
 * A pipeline as written, its items typed from the source through the stages to the sinks (docs/pipelines.md#composing-in-code):
 * `I` is what the source yields, `S` the stages. Unparameterized, any pipeline.
 */
export type PipelineDefinition<I = any, S extends readonly AnyStage[] = readonly AnyStage[]> = Settings & {
  source: Source<I>;
  stages?: S;
  sinks: readonly Sink<ItemsAfter<I, S>>[];
};

/**
 * What `definePipeline` and `stream` take: a definition whose stages each take what the one before yields (else a
 * compile error at the first that does not, naming both item types) and whose sinks take what the last yields (else
 * "Sink<X> is not assignable to Sink<Y>"). The source alone decides `I`: the sinks' items are a conditional type over
 * the stages, which the compiler does not infer from, so no `NoInfer` is needed (it printed in every such message).
 */
export type TypedDefinition<I, S extends readonly AnyStage[]> = Settings & {
  source: Source<I>;
  stages?: S & CheckedStages<I, S>;
  sinks: readonly Sink<ItemsAfter<I, S>>[];
};

/** Marks the item type a defined pipeline's sinks take. */
declare const pipelineItems: unique symbol;

/** A pipeline ready to run; `O` is what its last stage yields. */
export type Pipeline<O = any> = z.output<typeof pipelineSchema> & { readonly [pipelineItems]?: O };

/** Validates a pipeline definition (every problem named by its field) and returns it ready to run. */
export function definePipeline<I, const S extends readonly AnyStage[] = readonly []>(definition: TypedDefinition<I, S>): Pipeline<ItemsAfter<I, S>> {
  const subject = `Invalid pipeline${typeof definition?.name === 'string' ? ` "${definition.name}"` : ''}`;
  // What its source, stages and sinks met when the file built them (while the command line loads it), said with its own.
  const deferred = deferredProblems(definition);
  if (deferred.length === 0) return ValidationError.parse(pipelineSchema, definition, subject);
  try {
    ValidationError.parse(pipelineSchema, definition, subject);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    throw ValidationError.combine(subject, [...deferred, error]);
  }
  throw ValidationError.combine(subject, deferred);
}
