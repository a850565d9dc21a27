import { seriesStates } from '../pipeline/context.ts';
import { closeRun } from './close-run.ts';
import { type Committer, createCommitter } from './commit.ts';
import { commitPages } from './commit-loop.ts';
import { databaseRegistry } from './databases.ts';
import { definePipeline, type Pipeline, type PipelineDefinition } from '../config/define.ts';
import { hostFor } from './host.ts';
import { type Held, openRun } from './open-run.ts';
import { explainOutputFailure } from './output-error.ts';
import { outputSuspects } from './outputs.ts';
import { clientForRun } from './run-client.ts';
import { runModule } from './run-module.ts';
import type { RunEvent, RunOptions } from './run-types.ts';
import { runMetrics } from './run-metrics.ts';
import { releaseSink } from './sinks-in-use.ts';
import { runSpans } from './run-spans.ts';
import type { RunSummary } from './summary.ts';
import { obeySignals, recordSpend, schedulerFor, sourceContext } from './wiring.ts';
import { type OwedNotifications, recordRunEnd } from './notify-end.ts';
import { readyWebhooks } from '../notify/ready-webhooks.ts';
import { secretForms, SECRET_VARIABLE } from '../notify/webhook-secret.ts';
import { redactError, redactor } from '../redact.ts';
import { phase } from '../phase-marks.ts';
import { ValidationError } from '../errors/validation-error.ts';

export type { RunEvent, RunOptions } from './run-types.ts';
export { statePath } from './outputs.ts';

/**
 * Runs a pipeline: plan → scheduler → stages → sinks, one page at a time through the stages, each page committed once
 * and delivered once to every sink. An interrupted run of the same pipeline is resumed where it stopped. Resolves to
 * the run's summary, which is also stored in the `runs` table. The phases (docs/design.md#the-phases-of-a-run): open
 * (store, lease, what this invocation does, sinks), replay, wiring, the commit loop, close; then the pipeline's
 * webhooks are told of the end (docs/notifications.md), bounded, before it resolves: recorded under the run's lease,
 * delivered once it is released, so that a receiver slow to answer holds up no other run of the pipeline.
 */
export async function run(definition: PipelineDefinition | Pipeline | URL, options: RunOptions = {}): Promise<RunSummary> {
  // A module's URL: the pipeline runs on a thread of its own, with a bounded heap (run-module.ts).
  if (definition instanceof URL) return runModule(definition, options);
  phase('run');
  const pipeline = definePipeline(definition);
  const plan = pipeline.source.plan();
  // Every event reaches the run's metrics (a no-op until an application registers an OpenTelemetry SDK) and the caller.
  const measure = runMetrics(pipeline.name);
  const spans = runSpans(pipeline.name, options.telemetry);
  const emit = (event: RunEvent): void => {
    measure.record(event);
    spans.observe(event);
    options.onEvent?.(event);
  };
  // Webhooks (a secret to sign with, allowed hosts) and the API (an address, a key) are checked before anything is
  // opened or spent, all of them at once: three variables missing are said together, not in three runs.
  const env = options.env ?? process.env;
  const [webhooks, { client, destination, owned, secrets }] = ValidationError.all(`Pipeline "${pipeline.name}" cannot run`, [
    () => readyWebhooks(pipeline.notify, env),
    () => clientForRun(pipeline, options, emit),
  ]);
  // The run's secrets, out of everything it sends, prints or stores (docs/security.md#what-is-redacted): the key or
  // token, and the webhook secret (set, webhooks or not: a stage may read the environment).
  const redact = redactor([...secrets, ...secretForms(env[SECRET_VARIABLE])]);
  const databases = databaseRegistry();
  const held: Held = { sinks: [] };
  // How this process left the run (a worker's row says it): its summary's status, or `failed`.
  let left = 'failed';
  // Lets go of what the store runs to commit pages (SQLite: its commit thread) however the run ends.
  let committer: Committer | undefined;
  let freezeGauges: (() => void) | undefined;
  let owed: OwedNotifications | undefined;
  try {
    const opened = await openRun(pipeline, plan, options, databases, held);
    phase('opened');
    const { store, runId, decision, previous } = opened;
    // The budget caps the run across all its invocations (and, distributed, all its workers).
    const spentBefore = previous ? (await store.spendOf(runId)).spent : 0;
    // Where the run runs: this process alone, or one of its workers (docs/design.md#the-run-host).
    const host = await hostFor(pipeline, plan, opened, decision, spentBefore, held);
    phase('hosted');

    // Replay: committed pages a sink lacks are delivered from the journal before anything new is fetched.
    const states = seriesStates();
    const keys = store.seenKeys(runId);
    committer = createCommitter({ store: host.store, runId, sinks: held.sinks, states, keepJournal: pipeline.state.journal === 'keep', keys, claimKeys: host.claimsKeys });
    const replayed = await committer.replay();

    // Wiring: the scheduler under the run's budget, the ledger, the caller's signals, what sources see.
    const scheduler = schedulerFor(pipeline, decision.budget, spentBefore, options.clock, host);
    scheduler.on(emit);
    host.watch(scheduler);
    const ledgerFailure = recordSpend(scheduler, committer, runId);
    const retryFailed = decision.mode === 'resume' && decision.retryFailed;
    const source = sourceContext({ pipeline, runId, client, scheduler, store, committer, states, keys, previous, retryFailed, emit, host });
    emit({
      type: 'start',
      runId,
      pipeline: pipeline.name,
      series: plan.seriesCount,
      maxPages: plan.maxPages,
      budget: decision.budget?.maxCredits ?? null,
      spentBefore,
      resumed: previous !== undefined,
      replayed,
      notes: plan.notes ?? [],
      destination,
      ...(host.member ? { worker: host.member } : {}),
    });
    // After `start`, which names a distributed run's worker: its gauges say which worker they come from.
    freezeGauges = measure.observe({ stats: () => scheduler.stats(), backlog: source.backlog, fleet: host.fleet });

    // The commit loop, until the sources are done, the run stops, or something fails.
    const unsubscribe = obeySignals(scheduler, options);
    if (host.numbersPages) await committer.start();
    let failure = await commitPages(pipeline, source, committer, scheduler, emit, host.commitWindow);
    unsubscribe();
    phase('pages-done');
    await scheduler.onIdle();
    failure ??= ledgerFailure();
    // Every answered 2xx is spend, its page committed or not, and is recorded however the run ends: a run that fails
    // again and again (a broken stage, by cron or a restart loop) then ends at its budget, not past it.
    try {
      await committer.flush();
    } catch (error) {
      failure ??= error;
    }
    await committer.close();

    phase('closing');
    // A stage's error may hold anything it was given: redacted before it is stored in the runs table, or thrown.
    if (failure !== undefined) failure = redactError(failure, redact);
    const closed = await closeRun({ pipeline, plan, opened, scheduler, sinks: held.sinks, keys, destination, host }, failure);
    if (closed.ok) left = closed.summary.status;
    // The end is recorded and the exit code decided: what the webhooks are owed is recorded (delivered below, bounded;
    // never a failure of the run).
    if (webhooks && closed.recorded) {
      owed = await recordRunEnd({ opened, pipeline: pipeline.name, summary: closed.recorded, ...(closed.ok ? {} : { failure: closed.failure }), ready: webhooks, redact, emit, abortSignal: options.abortSignal });
    }
    if (!closed.ok) throw closed.failure;
    return spans.ended(closed.summary);
  } catch (error) {
    const failure = redactError(error, redact);
    throw spans.failed(explainOutputFailure(failure, outputSuspects(failure, pipeline)));
  } finally {
    freezeGauges?.();
    await committer?.close();
    try {
      await leave(held, left);
    } finally {
      // The lease is released and the sinks closed: the pipeline's next run may begin while the webhooks are told.
      await owed?.deliver();
      await databases.closeAll();
      if (owned) await client.close();
      phase('run-end');
    }
  }
}

/** This process leaves the run: its host (a worker's row says how), the pipeline's lease, its sinks. */
async function leave(held: Held, left: string): Promise<void> {
  phase('leaving');
  await held.host?.leave(left);
  phase('left');
  await held.lease?.release();
  for (const sink of held.sinks) {
    try {
      await sink.close();
    } finally {
      releaseSink(sink);
    }
  }
}
