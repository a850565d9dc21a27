import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { Pipeline } from '../config/define.ts';
import { loadPipeline } from '../config/load-pipeline.ts';
import { UsageError } from '../errors/usage-error.ts';
import { atDatabase } from '../postgres/failure.ts';
import { stateStoreWhere } from '../postgres/target.ts';
import { inZone } from '../recurring/occurrences.ts';
import type { RunTake } from '../recurring/run-take.ts';
import { type ClaimStore, type Launch, type LaunchOutcome, type ScheduleNews, WorkerLoop, type WorkerLoopOptions } from '../recurring/worker-loop.ts';
import { readyWebhooks } from '../notify/ready-webhooks.ts';
import { secretForms, SECRET_VARIABLE } from '../notify/webhook-secret.ts';
import { redactor } from '../redact.ts';
import type { NotificationSender } from '../run/notification-delivery.ts';
import { notifyMissed } from '../run/notify-missed.ts';
import { databaseRegistry } from '../run/databases.ts';
import { EXIT } from '../run/exit-codes.ts';
import { hostingFor } from '../run/open-run.ts';
import { stateDatabase, statePath } from '../run/outputs.ts';
import { run } from '../run/run.ts';
import type { RunOptions } from '../run/run-types.ts';
import { systemClock } from '../schedule/clock.ts';
import type { StateStore } from '../state/interfaces.ts';
import type { NotificationStore } from '../state/notification-store.ts';
import { openStateStore } from '../state/open/open-state-store.ts';
import { simulatorDay, simulatorPool, simulatorTarget, startCliSimulator } from './cli-simulator.ts';
import { stateUrlFrom } from './database-filters.ts';
import { type ProgressMode, progressReporter } from './progress.ts';
import { stopOnSignals } from './signals.ts';
import { retentionAfterRuns } from './worker-retention.ts';

export const workerHelp = `Usage: webdata-etl worker <pipeline files…> [options]

A long-lived process that runs each pipeline when its schedule says (schedule: { cron, timezone, missed } in the
pipeline; docs/schedules.md). Each run works as \`webdata-etl run\` does, on a thread of its own; one run of a
pipeline at a time, several pipelines side by side. Start as many workers as you like on the same pipelines: each
occurrence is claimed once in the pipeline's state store, so it makes one run. With the state in PostgreSQL and
every sink on that database (a distributed run), every worker joins that run; otherwise the claimant alone runs it.

An occurrence due while the pipeline's run is still at work is skipped; those due while no worker was up are
missed (missed: once runs the latest of them once, late; missed: skip runs none), and the pipeline's webhooks
told of them (notify, on: ['missed']; checked as the worker starts). A run stopped by its keys' allowance is
taken up by the first occurrence with credits to spend: those before send nothing, recorded skipped with the reason
(docs/schedules.md#allowances-and-the-worker). \`webdata-etl runs\` and
\`webdata-etl status\` show each occurrence's fate; \`webdata-etl schedules\` the next ones. The schedule keeps the
state store's clock (PostgreSQL's now()), whatever this machine's says.

SIGTERM or Ctrl-C: no new runs; the runs at work stop as \`run\` stops (answers in flight are committed; a
distributed run's series go back to its queue for the other workers), then the worker exits 0. The next start
takes an unfinished run up again. A second signal aborts the runs at work.

Options:
  --state <url>          keep the pipelines' state in PostgreSQL, postgres://user@host/db (overrides WEBDATA_STATE_URL
                         and each pipeline's state); the password from PGPASSWORD or ~/.pgpass, never a flag
  --base-url <url>       the API's {base_url} (overrides WEBDATA_BASE_URL and the pipelines' api.baseUrl)
  --simulator            run against a built-in simulator started with the worker (no account, no network); its
                         rankings drift every 5 s, or are those of one simulated day with WEBDATA_SIMULATOR_DAY=<n>
  --simulator-keys <keys>
                         give that simulator a pool of keys, label:rate[/burst[/credits]][@revoke-after] each,
                         comma-separated (main:8,second:4/2); each run sends them as WEBDATA_API_KEYS, in place of
                         the environment's keys (or WEBDATA_SIMULATOR_KEYS)
  --log-format <format>  text (default: plain lines) or json
  --quiet                no progress on stderr (occurrences, errors and summaries still)
  -h, --help             show this help

Each run's summary goes to stdout as one JSON line; progress and the schedule's news go to stderr.
The key comes from WEBDATA_API_KEY (or WEBDATA_TOKEN), never from a pipeline file.
Exit codes: 0 stopped by a signal, 2 invalid configuration or usage (said before any run: a pipeline, its schedule,
its webhooks), 75 a pipeline's state store cannot be reached at the start (the message says what to check),
1 unexpected.
`;

/**
 * A scheduled pipeline as the worker holds it: its file (each run imports it again), and its state store as its loop
 * claims occurrences there and its missed ones are told: each role its own.
 */
interface Scheduled {
  file: string;
  pipeline: Pipeline & { schedule: NonNullable<Pipeline['schedule']> };
  claims: ClaimStore;
  notifications: NotificationStore;
  shared: boolean;
}

/** `webdata-etl worker <files…>`: resolves to the exit code once a signal has stopped it and its runs are over. */
export async function workerCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      state: { type: 'string' },
      'base-url': { type: 'string' },
      simulator: { type: 'boolean' },
      'simulator-keys': { type: 'string' },
      'log-format': { type: 'string' },
      quiet: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(workerHelp);
    return EXIT.ok;
  }
  if (positionals.length === 0) throw new UsageError('worker needs one or more pipeline files with a schedule: webdata-etl worker pipelines/rank-tracking.ts (see --help)');
  const format = values['log-format'] ?? 'text';
  if (format !== 'text' && format !== 'json') throw new UsageError(`--log-format must be text or json; got "${format}"`);
  if (values.simulator && values['base-url']) throw new UsageError('--simulator and --base-url contradict each other: choose one');
  const pool = simulatorPool(values, process.env, 1_000_000);
  const day = simulatorDay(values, process.env);
  const stateUrl = stateUrlFrom(values.state, process.env.WEBDATA_STATE_URL);
  const pipelines = await loadScheduled(positionals);

  const mode: ProgressMode = values.quiet ? 'quiet' : format === 'json' ? 'json' : 'plain';
  const write = (line: string) => process.stderr.write(line);
  const say = (news: ScheduleNews) => write(format === 'json' ? `${JSON.stringify({ time: new Date().toISOString(), event: 'schedule', ...news })}\n` : `${newsLine(news, pipelines)}\n`);
  let loops: WorkerLoop[] = [];
  // "The run can be resumed" only when one is at work: a worker waiting for its next occurrence has nothing to resume.
  const stopping = () =>
    loops.some((loop) => loop.atWork)
      ? 'no new runs; the runs at work stop: nothing new is sent, answers in flight are committed; each can be resumed.'
      : 'no run is at work, and none is started.';
  const signals = stopOnSignals((message) => say({ pipeline: '(worker)', message }), stopping);
  const databases = databaseRegistry();
  // Set up as for `run --simulator`: rankings drift, and WEBDATA_ALLOWED_HOSTS holds (with the simulator's host added).
  const sim = values.simulator ? await startCliSimulator('worker', 1_000_000, pool, day) : undefined;
  try {
    const scheduled: Scheduled[] = [];
    for (const { file, pipeline } of pipelines) {
      const store = await claimStore(pipeline, stateUrl, databases);
      scheduled.push({ file, pipeline, claims: store, notifications: store, shared: hostingFor(store, pipeline).shared });
    }
    if (sim) say({ pipeline: '(worker)', message: `simulator at ${sim.url}` });
    // Where the key goes is each run's to say (its start line), as for `run`.
    const target: RunOptions = sim
      ? simulatorTarget(sim, process.env)
      : values['base-url']
        ? { baseUrl: values['base-url'], sources: { baseUrl: '--base-url' } }
        : {};
    const worker = `${hostname()}-${process.pid}-${randomBytes(2).toString('hex')}`;
    // Checked before anything runs, as each run checks its own: the webhooks a missed occurrence is told to.
    const tellers = scheduled.map(({ pipeline, notifications }) => missedTeller({ pipeline, store: notifications, worker, env: target.env ?? process.env, secrets: [target.apiKey, ...(sim?.pool ?? []).map(({ key }) => key)], say, mode, abortSignal: signals.abortSignal }));
    for (const { pipeline } of scheduled) {
      const { cron, timezone, missed } = pipeline.schedule;
      say({ pipeline: pipeline.name, message: `scheduled "${cron}" in ${timezone} (missed: ${missed}) as worker ${worker}` });
    }
    loops = scheduled.map(
      ({ file, pipeline, claims, shared }, index) =>
        new WorkerLoop({
          pipeline: { name: pipeline.name, schedule: pipeline.schedule, shared },
          store: claims,
          launch: launcher(file, { ...target, ...(stateUrl === undefined ? {} : { stateUrl }), signal: signals.signal, abortSignal: signals.abortSignal }, mode, retentionAfterRuns(pipeline, stateUrl, say)),
          worker,
          stop: signals.signal,
          clock: systemClock,
          say,
          tellMissed: tellers[index],
        }),
    );
    await Promise.all(loops.map((loop) => loop.run()));
    say({ pipeline: '(worker)', message: 'stopped: every run at work has ended' });
    return EXIT.ok;
  } finally {
    signals.dispose();
    await databases.closeAll();
    await sim?.close();
  }
}

/** The files' pipelines, each with a schedule and a name of its own: refused before anything runs otherwise. */
async function loadScheduled(files: string[]): Promise<{ file: string; pipeline: Scheduled['pipeline'] }[]> {
  const loaded: { file: string; pipeline: Scheduled['pipeline'] }[] = [];
  for (const file of files) {
    const pipeline = await loadPipeline(file);
    if (pipeline.schedule === undefined) {
      throw new UsageError(`${file}: pipeline "${pipeline.name}" has no schedule: add schedule: { cron: '0 6 * * *', timezone: 'UTC' } to run it with worker (or run it with webdata-etl run)`);
    }
    const twin = loaded.find((other) => other.pipeline.name === pipeline.name);
    if (twin) throw new UsageError(`${file} and ${twin.file} are both pipeline "${pipeline.name}": give each pipeline a name of its own`);
    loaded.push({ file, pipeline: pipeline as Scheduled['pipeline'] });
  }
  return loaded;
}

/**
 * The store of the pipeline's occurrences: its state store, where its runs will keep their state (`run` decides it
 * the same way), opened here for the worker's lifetime.
 */
async function claimStore(pipeline: Pipeline, stateUrl: string | undefined, databases: ReturnType<typeof databaseRegistry>): Promise<StateStore> {
  const target = stateDatabase(pipeline, stateUrl);
  if (!target) return openStateStore({ kind: 'sqlite', db: databases.get(statePath(pipeline)) });
  const pool = databases.postgres(target);
  return atDatabase(stateStoreWhere(target), () => openStateStore({ kind: 'postgres', pool, target, schema: pipeline.state.schema, pipeline: pipeline.name }), pool);
}

/**
 * How the worker runs a pipeline file: `run(url)`, which imports the file again on a thread of its own with a
 * bounded heap (run/run-module.ts), as `webdata-etl run` does; its progress on stderr, its summary a line on stdout;
 * then `afterRun`, the pipeline's retention (`worker-retention.ts`).
 */
function launcher(file: string, options: RunOptions, mode: ProgressMode, afterRun?: () => Promise<void>): Launch {
  const url = pathToFileURL(resolve(file));
  return async (take: RunTake, hooks): Promise<LaunchOutcome> => {
    const reporter = progressReporter({ mode });
    let runId: string | undefined;
    try {
      const summary = await run(url, {
        ...options,
        pipelineFile: file,
        take,
        onEvent: (event) => {
          reporter.onEvent(event);
          if (event.type !== 'start') return;
          runId = event.runId;
          hooks.onStart({ runId, resumed: event.resumed && event.worker?.joined !== true });
        },
      });
      reporter.finish(summary, undefined);
      process.stdout.write(`${JSON.stringify(summary)}\n`);
      // The pipeline's retention, once the run has left its state (never fails the run: it says why and goes on).
      await afterRun?.();
      return { kind: 'ran', runId: summary.runId, status: summary.status };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const name = error instanceof Error ? error.name : '';
      // Not a failure: the pipeline's run is at work elsewhere, or the one to join has ended.
      if (name === 'LeaseHeldError' || name === 'RunAtWorkError') return { kind: 'busy', message };
      if (name === 'RunEndedError') return { kind: 'ended', message };
      reporter.finish(undefined, error);
      return { kind: 'failed', message, runId };
    }
  };
}

/**
 * How a pipeline's missed occurrences are told to its webhooks whose `on` has `missed` (none: undefined), from the
 * worker, which found them: signed and delivered as a run's end is (run/notify-missed.ts). Refused before anything
 * runs when the webhooks cannot be used (no WEBDATA_WEBHOOK_SECRET, a host WEBDATA_ALLOWED_HOSTS leaves out), exit 2.
 */
function missedTeller(parts: {
  pipeline: Scheduled['pipeline'];
  store: NotificationStore;
  worker: string;
  env: Readonly<Record<string, string | undefined>>;
  secrets: (string | undefined)[];
  say: (news: ScheduleNews) => void;
  mode: ProgressMode;
  abortSignal: AbortSignal;
}): WorkerLoopOptions['tellMissed'] {
  const { pipeline, store, env } = parts;
  const ready = readyWebhooks(pipeline.notify, env);
  if (!ready?.webhooks.some((hook) => hook.on.includes('missed'))) return undefined;
  const reporter = progressReporter({ mode: parts.mode });
  const sender: NotificationSender = {
    store,
    ready,
    redact: redactor([...parts.secrets, env.WEBDATA_API_KEY, env.WEBDATA_TOKEN, ...secretForms(env[SECRET_VARIABLE])]),
    emit: (event) => (event.type === 'warning' ? parts.say({ pipeline: pipeline.name, message: event.message }) : reporter.onEvent(event)),
    abortSignal: parts.abortSignal,
  };
  return (found) => notifyMissed({ sender, pipeline: pipeline.name, schedule: pipeline.schedule, worker: parts.worker, found });
}

/** A line of the schedule's news: the pipeline, the occurrence in its time zone when there is one, what became of it. */
function newsLine(news: ScheduleNews, pipelines: { pipeline: Scheduled['pipeline'] }[]): string {
  if (news.dueAt === undefined) return `${news.pipeline}: ${news.message}`;
  const timezone = pipelines.find((p) => p.pipeline.name === news.pipeline)?.pipeline.schedule.timezone ?? 'UTC';
  return `${news.pipeline}: due ${inZone(Date.parse(news.dueAt), timezone)}${news.outcome ? ` ${news.outcome}` : ''}: ${news.message}`;
}
