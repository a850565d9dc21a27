import { seriesStates } from '../pipeline/context.ts';
import { systemClock } from '../schedule/clock.ts';
import { allowanceShares } from './allowance-shares.ts';
import { declareAllowances, type KeyBook, runAllowance, type RunAllowances, runAllowances } from './allowances.ts';
import { type ClosedRun, closeRun, leaveRun } from './close-run.ts';
import { type Committer, createCommitter } from './commit.ts';
import { commitPages } from './commit-loop.ts';
import { databaseRegistry } from './databases.ts';
import { definePipeline, type Pipeline, type PipelineDefinition } from '../config/define.ts';
import { hostFor } from './host.ts';
import type { RunHost } from '../host/run-host.ts';
import { type Held, openRun } from './open-run.ts';
import { explainOutputFailure } from './output-error.ts';
import { outputSuspects } from './outputs.ts';
import { clientForRun } from './run-client.ts';
import { claimFleetKeys } from './fleet-keys.ts';
import { keepLimits, limitMemory } from './limit-memory.ts';
import { runModule } from './run-module.ts';
import { runObserver } from './run-observer.ts';
import { checkTracking, pipelineTracking } from './tracking.ts';
import { planNewRun, refreshFeed } from './refresh-run.ts';
import { describeRefresh } from './refresh-summary.ts';
import type { RunEvent, RunOptions } from './run-types.ts';
import type { RunSummary } from './summary.ts';
import { obeySignals, type WiredRun, wireRun } from './wiring.ts';
import { readyWebhooks } from '../notify/ready-webhooks.ts';
import { secretForms, SECRET_VARIABLE } from '../notify/webhook-secret.ts';
import { redactError, redactor, warmRedactors } from '../redact.ts';
import { phase } from '../phase-marks.ts';
import { ValidationError } from '../errors/validation-error.ts';

export type { RunEvent, RunOptions } from './run-types.ts';
export { statePath } from './outputs.ts';

/**
 * Runs a pipeline: plan → scheduler → stages → sinks, one page at a time through the stages, each page committed once
 * and delivered once to every sink. An interrupted run of the same pipeline is resumed where it stopped. Resolves to
 * the run's summary, which is also stored in the `runs` table. The phases (docs/design.md#the-phases-of-a-run): open
 * (store, lease, what this invocation does, sinks), replay, wiring, the commit loop, close, which records what the
 * pipeline's webhooks are owed for the end (docs/notifications.md) under the run's lease; they are told, bounded,
 * once it is released, before this resolves, so that a receiver slow to answer holds up no other run of the pipeline.
 */
export async function run(definition: PipelineDefinition | Pipeline | URL, options: RunOptions = {}): Promise<RunSummary> {
  // A module's URL: the pipeline runs on a thread of its own, with a bounded heap (run-module.ts).
  if (definition instanceof URL) return runModule(definition, options);
  phase('run');
  const pipeline = definePipeline(definition);
  const plan = pipeline.source.plan();
  // What observes the run (its metrics, its spans, the caller's onEvent) hears every event (run-observer.ts).
  const observer = runObserver(pipeline.name, options);
  const { emit } = observer;
  // Webhooks (a secret to sign with, allowed hosts) and the API (an address, a key) are checked before anything is
  // opened or spent, all of them at once: three variables missing are said together, not in three runs.
  const env = options.env ?? process.env;
  const [webhooks, allowance, { client, clients, destination, owned, secrets, identities }] = ValidationError.all(`Pipeline "${pipeline.name}" cannot run`, [
    () => readyWebhooks(pipeline.notify, env),
    () => runAllowance(pipeline, plan, options.allowance),
    () => clientForRun(pipeline, options, emit),
    () => checkTracking(pipeline, plan),
  ]);
  // The run's secrets, out of everything it sends, prints or stores (docs/security.md#what-is-redacted): the key or
  // token, and the webhook secret (set, webhooks or not: a stage may read the environment).
  const redact = redactor([...secrets, ...secretForms(env[SECRET_VARIABLE])]);
  const databases = databaseRegistry();
  const held: Held = { sinks: [] };
  // Lets go of what the store runs to commit pages (SQLite: its commit thread) however the run ends.
  let committer: Committer | undefined;
  // How the run closed: how this process leaves it (a worker's row says it), and what the webhooks are owed.
  let closed: ClosedRun | undefined;
  // The keys' allowances as this run spends them: their holds renewed while it lives.
  let allowances: RunAllowances | undefined;
  try {
    // The keys' allowances declared (or found) in the state store before the run is recorded (docs/credits.md#allowances).
    let book: KeyBook | undefined;
    const opened = await openRun(
      pipeline,
      plan,
      options,
      databases,
      held,
      async (store) => {
        book = await declareAllowances(store, pipeline, identities, allowance);
      },
      // A new run's refresh plan, under its budget in pages (refresh-run.ts).
      (store, runId, decision) => planNewRun({ store, pipeline, plan, runId, budget: decision.budget, labels: [...clients.keys()], shares: () => allowanceShares(store, book as KeyBook, { pipeline, allowance, runId }) }),
    );
    phase('opened');
    const { store, runId } = opened;
    // The budget caps the run across all its invocations (and, distributed, all its workers).
    const spentBefore = opened.previous ? (await store.spendOf(runId)).spent : 0;
    // Where the run runs, as the opening decided: this process alone, or one of its workers (docs/design.md#the-run-host).
    const hosting = hostFor(pipeline, plan, opened, spentBefore, held);
    // The redactors' patterns compiled while the host is made: a worker's waits on its database (the planning lock,
    // pg-boss, the plan), not its first answer, pay for them.
    warmRedactors();
    const host = await hosting;
    phase('hosted');
    // A label is one key across a distributed run's workers: this one's, checked before it sends anything.
    await claimFleetKeys(host, store, identities);

    // Replay: committed pages a sink lacks are delivered from the journal before anything new is fetched.
    const states = seriesStates();
    const keys = store.seenKeys(runId);
    committer = createCommitter({ store: host.store, runId, sinks: held.sinks, states, keepJournal: pipeline.state.journal === 'keep', keys, claimKeys: host.claimsKeys, tracking: pipelineTracking(pipeline) });
    const replayed = await committer.replay();

    // What the keys learned of the server's limit in earlier runs: where their rate controllers start.
    const memory = await limitMemory(store, host, identities);
    // A spread allowance: each key's share of this occurrence, by the store's clock (docs/credits.md#spreading-an-allowance).
    const shares = await allowanceShares(store, book as KeyBook, { pipeline, allowance, runId });
    const caps = new Map([...shares].map(([label, share]) => [label, share.cap]));
    allowances = runAllowances(store, book as KeyBook, { pipeline: pipeline.name, runId, clock: options.clock ?? systemClock, labels: [...clients.keys()], caps });
    // Wiring: the scheduler under the run's budget, the ledger, what sources see; then the run's start is told.
    const notes = [...shares.values()].map((share) => share.note);
    // What the refresh plan chose as the run opened (docs/pipelines.md#the-refresh-planner).
    if (opened.refresh) notes.push(`refresh plan as the run opened: ${describeRefresh(opened.refresh)}`);
    // The refresh plan's series in its order, re-planned as they end (a new run in this process: refresh-feed.ts).
    const refresh = refreshFeed(opened, host, pipeline);
    const wired = wireRun({ pipeline, plan, opened, host, client, clients, committer, states, keys, spentBefore, replayed, destination, observer, clock: options.clock, starts: memory?.starts, allowances, notes, refresh });
    refresh?.watch(wired.scheduler);
    // The commit loop, until the sources are done, the run stops, or something fails.
    const looped = await commitLoop(pipeline, wired, committer, host, options, emit);
    let failure = looped.failure;
    await committer.close();
    // Its spend written, what the run still holds of its keys' allowances is free again (unwritten, it expires).
    if (looped.flushed) await releaseHolds(allowances, emit, redact);
    // However it ended: what was learned before a failure or an interruption is worth as much.
    await keepLimits(memory, wired.scheduler, emit, redact);

    phase('closing');
    // A stage's error may hold anything it was given: redacted before it is stored in the runs table, or thrown.
    if (failure !== undefined) failure = redactError(failure, redact);
    // Close: the end recorded, and what the webhooks are owed for it (told once this process has left the run, below).
    const explained = () => refresh?.feed.explanation() ?? opened.refresh;
    closed = await closeRun({ pipeline, plan, opened, scheduler: wired.scheduler, sinks: held.sinks, keys, destination, host, webhooks, redact, emit, abortSignal: options.abortSignal, refresh: explained }, failure);
    if (!closed.ok) throw closed.failure;
    return observer.ended(closed.summary);
  } catch (error) {
    const failure = redactError(error, redact);
    throw observer.failed(explainOutputFailure(failure, outputSuspects(failure, pipeline)));
  } finally {
    allowances?.stop();
    observer.close();
    await committer?.close();
    try {
      // This process leaves the run (host, lease, sinks), and only then are the webhooks told (close-run.ts).
      await leaveRun(held, closed);
    } finally {
      await databases.closeAll();
      if (owned) for (const each of clients.values()) await each.close();
      phase('run-end');
    }
  }
}

/**
 * The commit loop (docs/design.md#the-phases-of-a-run): pages until the sources are done, the run stops (the caller's
 * signals) or something fails. Resolves to the failure that ended it, if one did.
 */
async function commitLoop(
  pipeline: Pipeline,
  wired: WiredRun,
  committer: ReturnType<typeof createCommitter>,
  host: RunHost,
  options: RunOptions,
  emit: (event: RunEvent) => void,
): Promise<{ failure: unknown; flushed: boolean }> {
  const { scheduler, source } = wired;
  const unsubscribe = obeySignals(scheduler, options);
  // The journal's number is known before the first page comes, whoever numbers the pages (a worker's statement does):
  // a page handed over before it would wait for it, and the pages behind it in the window would each read it again,
  // then commit in whatever order the reads answered (docs/design.md#the-run-host).
  await committer.start();
  let failure = await commitPages(pipeline, source, committer, scheduler, emit, host.commitWindow);
  unsubscribe();
  phase('pages-done');
  await scheduler.onIdle();
  failure ??= wired.ledgerFailure();
  // Every answered 2xx is spend, its page committed or not, and is recorded however the run ends: a run that fails
  // again and again (a broken stage, by cron or a restart loop) then ends at its budget, not past it.
  try {
    await committer.flush();
  } catch (error) {
    return { failure: failure ?? error, flushed: false };
  }
  return { failure, flushed: true };
}

/**
 * What the run holds of its keys' allowances goes back. Holds that cannot be given back fail nothing: they expire
 * (run/allowances.ts), and the run says so (a warning, redacted like every message).
 */
async function releaseHolds(allowances: RunAllowances, emit: (event: RunEvent) => void, redact: (text: string) => string): Promise<void> {
  try {
    await allowances.release();
  } catch (error) {
    emit({ type: 'warning', message: redact(`what the run held of its keys' allowances was not given back (it is, within a minute): ${error instanceof Error ? error.message : String(error)}`) });
  }
}
