import type { PgBoss } from 'pg-boss';
import type { Series } from '../pipeline/page.ts';
import type { HeldLock } from '../postgres/advisory-lock.ts';
import { pgDriver } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';
import { loadBoss, queueName, queueOptions, queuePrefix, seriesJobId } from './boss.ts';
import { workersAtWork } from './liveness.ts';
import { expireGoneWorkers } from './shared-meter.ts';
import { planStatements, serverStatements } from './statements.ts';

/**
 * The queues of a pipeline's runs: an earlier planning of this run (nobody works it: planning happens only when no
 * worker may be at work, and its jobs would page series twice), and finished or abandoned runs' (one run of a
 * pipeline at a time). They go when the pipeline is planned again — but a queue whose run has a worker that may still
 * be at work (one that has not heard that another recorded the run's end, say) stays for it, until a later planning.
 */
async function pipelineQueues(boss: PgBoss, pipeline: string): Promise<string[]> {
  const prefix = queuePrefix(pipeline);
  const names: string[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await boss.getQueues(undefined, { limit: 1000, ...(after === undefined ? {} : { after }) });
    names.push(...page.map((queue) => queue.name).filter((name) => name.startsWith(prefix)));
    if (page.length < 1000) return names;
    after = page.at(-1)?.name;
  }
}

/** The run a queue of the pipeline's is for (`queueName`: the prefix, the run, "/", the planning). */
function runOfQueue(queue: string, pipeline: string): string {
  const rest = queue.slice(queuePrefix(pipeline).length);
  return rest.slice(0, rest.lastIndexOf('/'));
}

/** How a run's jobs are inserted: jobs per statement, and statements on their way at once (`insertJobs`). */
export interface PlanInserts {
  batch: number;
  inFlight: number;
}

/**
 * A million series is a thousand statements, not a million. More jobs to a statement gain nothing (5,000: the cost is
 * the rows and pg-boss's indexes, not the statements); two statements on their way at once let the next batch and its
 * job ids be made while the database inserts one, on two of its connections: a million series planned in 72-77 s
 * where one at a time took 117-181 s, on a machine at a load average of 40-55 (docs/benchmarks.md#planning-at-scale).
 */
export const PLAN_INSERTS: PlanInserts = { batch: 1000, inFlight: 2 };

/**
 * The planning lock of a pipeline: one process at a time decides what the run is (new, resumed, joined) and plans
 * it; the others wait, then join what it planned. Session locks on a connection of its own, so that a planner that
 * dies lets go of them with its connection. Two locks, so that workers started together join side by side rather than
 * one after another (each holds it through its sinks and registration, its pg-boss started as it waited:
 * docs/benchmarks.md#joining-a-run):
 *
 * - the deciding lock (exclusive), held while `decide` looks at the runs: by a joiner only for that look, by a
 *   planner until it is a worker of the run it planned;
 * - the joining lock: shared by joiners until each is a worker (registered, `workersAtWork` counts it), exclusive for a
 *   planner. A planner so never plans while a process that saw a worker at work is still on its way in: should the
 *   workers it saw have gone meanwhile, the planner waits for it to register, and then looks again (and joins).
 *
 * `decide` says whether this process joins a run at work (its own reading of the runs: `joining`); what it returns is
 * what was decided under the locks it needed, for the caller to act on as it is.
 */
export async function planningLock<T extends { joining: boolean }>(store: PostgresStateStore, pipeline: string, decide: () => Promise<T>): Promise<{ lock: HeldLock; decided: T }> {
  // The job queue's module loads while this process waits its turn (a failure to load is openBoss's to report).
  loadBoss().catch(() => undefined);
  const client = new (pgDriver().Client)(store.pool.options);
  client.on('error', () => undefined);
  const end = () => client.end().catch(() => undefined);
  const deciding = `webdata-etl:plan:${store.schema}:${pipeline}`;
  const joiningLock = `webdata-etl:join:${store.schema}:${pipeline}`;
  try {
    await client.connect();
    await waitForLock(client, serverStatements.advisoryLock, deciding);
    let decided = await decide();
    if (decided.joining) {
      // Granted at once: only a holder of the deciding lock ever asks for the joining lock exclusively, and that is us.
      await waitForLock(client, serverStatements.advisoryLockShared, joiningLock);
      await client.query(serverStatements.advisoryUnlock, [deciding]);
    } else {
      await waitForLock(client, serverStatements.advisoryLock, joiningLock);
      decided = await decide();
    }
    return { lock: { client, release: end }, decided };
  } catch (error) {
    await end();
    throw error;
  }
}

/** PostgreSQL's code for a statement cancelled: by the statement timeout, here. */
const QUERY_CANCELED = '57014';

/**
 * Waits for a session lock as long as its holder keeps it: the planner holds the deciding lock while it plans, which
 * is longer than a statement's timeout at a million series on a busy server (270 s at a load average of 50: every
 * joiner failed, "canceling statement due to statement timeout", exit 1). A wait cut by the timeout is asked again;
 * the holder lets go when it is done, or with its connection when it dies. A server that stops answering still fails
 * it (the driver's own timeout on the socket, another error).
 */
async function waitForLock(client: { query(text: string, values: unknown[]): Promise<unknown> }, text: string, name: string): Promise<void> {
  for (;;) {
    try {
      await client.query(text, [name]);
      return;
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code !== QUERY_CANCELED) throw error;
    }
  }
}

export interface RunPlan {
  pipeline: string;
  runId: string;
  /** Which planning of the run this is (its invocation): each has a queue of its own. */
  planningNumber: number;
  series: Iterable<Series>;
  budget: number | null;
  /** Series that ended `failed` are queued again (a resume that retries them). */
  retryFailed: boolean;
  /** What the run spent before: the shared budget row starts from it when the run has none yet. */
  spentBefore: number;
}

/**
 * Plans a run for its workers: a queue of this planning's own with one job per series not yet over, the shared
 * limits (budget, rate) and no stop. Idempotent: job ids are derived from (run, series, planning), so a planner that
 * died part way and the one after it insert each job once. The pipeline's other queues go (`pipelineQueues`).
 */
export async function planRun(boss: PgBoss, store: PostgresStateStore, plan: RunPlan, inserts: PlanInserts = PLAN_INSERTS): Promise<string> {
  const sql = planStatements(quoteIdentifier(store.schema));
  const queue = queueName(plan.pipeline, plan.runId, plan.planningNumber);
  for (const stale of await pipelineQueues(boss, plan.pipeline)) {
    if (stale !== queue && (await workersAtWork(store, runOfQueue(stale, plan.pipeline))) === 0) await boss.deleteQueue(stale);
  }
  await boss.createQueue(queue, queueOptions);
  if (plan.retryFailed) {
    await store.pool.query(sql.retryFailed, [plan.runId]);
  }
  const resumed = (await store.pool.query<{ over: boolean }>(sql.anySeriesOver, [plan.runId])).rows[0]?.over === true;
  // The series over (a resume) are asked batch by batch, as the plan is: a million ids are never held at once.
  const over = async (ids: string[]) =>
    resumed ? new Set((await store.pool.query<{ series_id: string }>(sql.seriesOverOf, [plan.runId, ids])).rows.map((row) => row.series_id)) : new Set<string>();
  await insertJobs(boss, queue, jobsOf(plan, over, inserts.batch), inserts.inFlight);
  // No worker may be at work (or this planning would not happen): what the run's workers still hold is a dead one's.
  await expireGoneWorkers(store.pool, store.schema, plan.runId);
  await store.pool.query(sql.planLimits, [plan.runId, plan.budget, plan.spentBefore]);
  await store.pool.query(sql.planKeys, [plan.runId]);
  return queue;
}

type SeriesJob = { id: string; data: { series: string } };

/** The plan's series not over, as jobs, up to `batch` at a time: made as they are inserted (the plan is never held). */
async function* jobsOf(plan: RunPlan, over: (ids: string[]) => Promise<ReadonlySet<string>>, batch: number): AsyncGenerator<SeriesJob[]> {
  for (const ids of idBatches(plan.series, batch)) {
    const done = await over(ids);
    const jobs = ids.filter((id) => !done.has(id)).map((id) => ({ id: seriesJobId(plan.runId, id, plan.planningNumber), data: { series: id } }));
    if (jobs.length > 0) yield jobs;
  }
}

function* idBatches(series: Iterable<Series>, batch: number): Generator<string[]> {
  let ids: string[] = [];
  for (const one of series) {
    ids.push(one.id);
    if (ids.length >= batch) {
      yield ids;
      ids = [];
    }
  }
  if (ids.length > 0) yield ids;
}

/** Inserts the batches in order, at most `inFlight` statements on their way at once; every one is settled before it returns. */
async function insertJobs(boss: PgBoss, queue: string, batches: AsyncIterable<SeriesJob[]>, inFlight: number): Promise<void> {
  const pending: Promise<unknown>[] = [];
  try {
    for await (const jobs of batches) {
      const inserting = boss.insert(queue, jobs);
      // Awaited below; marked handled now, so that one failing while an earlier one is awaited is not "unhandled".
      inserting.catch(() => undefined);
      pending.push(inserting);
      if (pending.length >= inFlight) await pending.shift();
    }
    while (pending.length > 0) await pending.shift();
  } finally {
    await Promise.allSettled(pending);
  }
}

