import { relative, resolve } from 'node:path';
import { isMainThread } from 'node:worker_threads';
import { parseArgs } from 'node:util';
import { checkOutputPath, writeOutputFile } from '../output-file.ts';
import { definePipeline, type Pipeline, type PipelineDefinition } from '../config/define.ts';
import { run, statePath } from '../run/run.ts';
import { fileOf } from '../run/outputs.ts';
import type { Sink } from '../sinks/sink.ts';
import { stopOnSignals } from './signals.ts';
import type { RunSummary } from '../run/summary.ts';
import { simulatorDay, simulatorPool, simulatorTarget, startCliSimulator } from './cli-simulator.ts';
import { EXIT, exitCodeFor } from '../run/exit-codes.ts';
import { loadPipeline } from '../config/load-pipeline.ts';
import { exitOnUncaughtInputErrors } from '../run/input-errors.ts';
import { type ProgressMode, progressReporter } from './progress.ts';
import { UsageError } from '../errors/usage-error.ts';
import { isStdout, outputName, readerWentAway } from './stdout.ts';
import { stateUrlFrom } from './database-filters.ts';
import { runOnThread, type ThreadTask } from './run-on-thread.ts';
import { handedOver, importHandingOver } from '../threads/hand-over.ts';
import { metricsSetup, wantsTelemetry } from './metrics-options.ts';

const OPTIONS_HELP = `Options:
  --fresh                abandon an unfinished run (its partial rows go) and start a new one
  --resume               continue a finished run that stopped on its budget (with --budget) or retry its failed series
  --budget <credits>     the most credits the run may spend in all; with --resume, the run's new total cap
  --base-url <url>       the API's {base_url} (overrides WEBDATA_BASE_URL and the pipeline's api.baseUrl)
  --state <url>          keep the run state in PostgreSQL, postgres://user@host/db (overrides WEBDATA_STATE_URL and
                         the pipeline's state); the password comes from PGPASSWORD or ~/.pgpass, never a flag
  --simulator            run against a built-in simulator started for this run (no account, no network); its
                         rankings drift every 5 s, or are those of one simulated day with WEBDATA_SIMULATOR_DAY=<n>
  --simulator-keys <keys>
                         give that simulator a pool of keys, label:rate[/burst[/credits]][@revoke-after] each,
                         comma-separated (main:8,second:4/2); the run sends them as WEBDATA_API_KEYS, in place of
                         the environment's keys (or WEBDATA_SIMULATOR_KEYS)
  --summary-json <file>  also write the run's summary to this file (- or /dev/stdout: stdout, where it goes anyway)
  --quiet                no progress or summary on stderr (errors, and why the run stopped, still)
  --log-format <format>  text (default: a live line on a terminal, plain lines otherwise) or json
  --metrics-port <port>  serve the run's metrics at http://<host>:<port>/metrics in Prometheus' text format while
                         the process runs (or WEBDATA_METRICS_PORT; 0: any free port, said on stderr)
  --metrics-host <host>  the address to serve them on (or WEBDATA_METRICS_HOST; default 127.0.0.1). /metrics has no
                         authentication: 0.0.0.0 serves it to every network this machine is on
  --metrics-linger <s>   after the run, wait up to this many seconds for a scrape of the final figures (or
                         WEBDATA_METRICS_LINGER; default 15; 0: exit at once); a scrape or Ctrl-C ends the wait
  -h, --help             show this help

The key comes from WEBDATA_API_KEY (or WEBDATA_TOKEN), never from a pipeline file; webhooks (notify) are signed
with WEBDATA_WEBHOOK_SECRET, and told of the run's end before the command exits (bounded; never its exit code).
An interrupted run resumes when the same command runs again. Ctrl-C once stops (resumable), twice aborts.
The summary goes to stdout as JSON; progress and logs go to stderr.
OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables) export the metrics over OTLP, with the exporter
package of OTEL_EXPORTER_OTLP_PROTOCOL installed beside webdata-etl (see docs/observability.md).

Exit codes: 0 finished (completed or budget), 2 invalid configuration or usage, 3 authentication failed (401),
4 plan, permission, credits or quota (402, 403, a quota-length 429), 5 finished with failed series,
75 try again later (stall, 429 retry budget spent, another run holds the lease, a worker presumed dead), 130 interrupted, 1 unexpected.
`;

export const runHelp = `Usage: webdata-etl run <pipeline.ts|pipeline.js|pipeline.json> [options]

Runs a pipeline: a module whose default export is definePipeline({ … }), or a JSON config.

${OPTIONS_HELP}`;

export const pipelineFileHelp = `Usage: node <pipeline.ts> [options]

${OPTIONS_HELP}`;

const flags = {
  fresh: { type: 'boolean' },
  resume: { type: 'boolean' },
  budget: { type: 'string' },
  'base-url': { type: 'string' },
  state: { type: 'string' },
  simulator: { type: 'boolean' },
  'simulator-keys': { type: 'string' },
  'summary-json': { type: 'string' },
  quiet: { type: 'boolean' },
  'log-format': { type: 'string' },
  'metrics-port': { type: 'string' },
  'metrics-host': { type: 'string' },
  'metrics-linger': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Flags = ReturnType<typeof parseFlags>['values'];

function parseFlags(args: string[], positionals: boolean) {
  return parseArgs({ args, options: flags, strict: true, allowPositionals: positionals });
}

/** `webdata-etl run <file>`. Resolves to the exit code. */
export async function runCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, true);
  if (values.help) {
    process.stdout.write(runHelp);
    return EXIT.ok;
  }
  const [file, ...extra] = positionals;
  if (!file) throw new UsageError('run needs a pipeline file: webdata-etl run pipelines/rank-tracking.ts (see --help)');
  if (extra.length > 0) throw new UsageError(`run takes one pipeline file; unexpected: ${extra.join(' ')}`);
  return execute(await loadPipeline(file), values, file);
}

// From here on, an input error that nothing catches is said as the command line says it (exit 2). The package root
// does the same for a pipeline file (run-from-command-line.ts); the command line loads this before any pipeline file.
exitOnUncaughtInputErrors();

/**
 * The package root's `runFromCommandLine` (src/run-from-command-line.ts), which loads this module when called: makes
 * `node pipelines/x.ts` take the same flags as `webdata-etl run`. Sets `process.exitCode`; resolves to it. The run
 * works on a thread of its own with a bounded heap (threads/bounded-thread.ts), which imports the file again: its
 * pipeline is its default export, or the one it hands to `runFromCommandLine`; a file with neither runs here, on the
 * main thread.
 */
export async function runPipelineFile(pipeline: Pipeline | PipelineDefinition, argv: string[]): Promise<number> {
  if (handedOver(pipeline)) return EXIT.ok;
  const task = threadTask(pipeline, argv);
  const file = process.argv[1] === undefined ? undefined : resolve(process.argv[1]);
  const code = (task && (await runOnThread(task))) ?? (await pipelineFileCommandLine(pipeline, argv, file));
  process.exitCode = code;
  return code;
}

/** The file's pipeline as the run's thread sees it, if it is the one the main thread was given (by its name). */
export async function handOverPipelines(file: string, pipelineName: string): Promise<Pipeline | undefined> {
  try {
    // The file is imported again here; its pipeline is what it hands runFromCommandLine, or its default export.
    const candidate = await importHandingOver(file);
    if (typeof candidate !== 'object' || candidate === null) return undefined;
    const pipeline = definePipeline(candidate as Pipeline);
    return pipeline.name === pipelineName ? pipeline : undefined;
  } catch {
    // It loaded on the main thread: whatever fails here, the run goes on there.
    return undefined;
  }
}

/** A pipeline file's run on a thread of its own, unless it is asking for help or its flags are wrong (said at once). */
function threadTask(pipeline: Pipeline | PipelineDefinition, argv: string[]): ThreadTask | undefined {
  if (!isMainThread || process.argv[1] === undefined) return undefined;
  try {
    if (parseFlags(argv, false).values.help) return undefined;
    return { kind: 'pipelineFile', file: resolve(process.argv[1]), argv, pipelineName: definePipeline(pipeline).name };
  } catch {
    return undefined;
  }
}

/** The command line of a pipeline file (`file`, absolute, named relative to the working directory). */
export async function pipelineFileCommandLine(pipeline: Pipeline | PipelineDefinition, argv: string[], file: string | undefined): Promise<number> {
  try {
    const { values } = parseFlags(argv, false);
    if (values.help) {
      process.stdout.write(pipelineFileHelp);
      return EXIT.ok;
    }
    return await execute(pipeline, values, file === undefined ? undefined : relative(process.cwd(), file));
  } catch (error) {
    process.stderr.write(`webdata-etl: ${inFlagWords(error instanceof Error ? error.message : String(error))}\n`);
    return exitCodeFor({ error });
  }
}

async function execute(pipeline: Pipeline | PipelineDefinition, values: Flags, pipelineFile: string | undefined): Promise<number> {
  const budget = values.budget === undefined ? undefined : Number(values.budget);
  if (budget !== undefined && !(Number.isFinite(budget) && budget >= 0)) throw new UsageError(`--budget must be a number of credits (0 or more); got "${values.budget}"`);
  const format = values['log-format'] ?? 'text';
  if (format !== 'text' && format !== 'json') throw new UsageError(`--log-format must be text or json; got "${format}"`);
  if (values.simulator && values['base-url']) throw new UsageError('--simulator and --base-url contradict each other: choose one');
  const pool = simulatorPool(values, process.env, 100_000);
  const day = simulatorDay(values, process.env);
  const stateUrl = stateUrlFrom(values.state, process.env.WEBDATA_STATE_URL);
  const telemetrySetup = metricsSetup(values, process.env);
  // `-`, or a name of this process's stdout (/dev/stdout): stdout, where the summary goes anyway.
  const summaryFile = outputName(values['summary-json']);
  // stdout is the data when a sink writes there (JSONL to "-"): the summary then goes to stderr.
  const sinks: unknown = pipeline.sinks;
  const stdoutTaken = Array.isArray(sinks) && sinks.some((sink: { path?: unknown } | null) => sink?.path === '-');
  if (isStdout(summaryFile) && stdoutTaken) {
    throw new UsageError(`--summary-json ${values['summary-json']}: stdout carries the rows of a sink writing to "-" (the summary goes to stderr): give --summary-json a file`);
  }
  if (summaryFile !== undefined && !isStdout(summaryFile)) {
    // Refused before any credit is spent: the summary written over the state store or an output would destroy it.
    const defined = definePipeline(pipeline);
    const outputs = [statePath(defined), ...(defined.sinks as Sink<unknown>[]).flatMap((sink) => fileOf(sink) ?? [])];
    checkOutputPath(summaryFile, { field: '--summary-json', databases: outputs, role: 'a file this run writes' });
  }

  const mode: ProgressMode = values.quiet ? 'quiet' : format === 'json' ? 'json' : process.stderr.isTTY ? 'tty' : 'plain';
  const reporter = progressReporter({ mode, color: process.stderr.isTTY === true && !process.env.NO_COLOR });
  for (const note of telemetrySetup.notes) reporter.log(`metrics: ${note}`);
  // The SDK is loaded only when asked for, and started before the run, which takes its meter as it starts: a port in
  // use or a missing exporter is said here, before any credit is spent.
  const telemetry = wantsTelemetry(telemetrySetup) ? await (await import('./run-telemetry.ts')).startTelemetry(telemetrySetup, reporter) : undefined;
  const signals = stopOnSignals((message) => reporter.log(message));
  // An explicit choice, never a fallback: the simulator runs only when asked for.
  const sim = values.simulator ? await startCliSimulator('cli', 100_000, pool, day) : undefined;
  if (sim) reporter.log(`simulator at ${sim.url}`);
  let summary: RunSummary | undefined;
  let failure: unknown;
  try {
    summary = await run(pipeline, {
      ...(sim
        ? simulatorTarget(sim, process.env)
        : values['base-url']
          ? { baseUrl: values['base-url'], sources: { baseUrl: '--base-url' } }
          : {}),
      pipelineFile,
      ...(stateUrl === undefined ? {} : { stateUrl }),
      signal: signals.signal,
      abortSignal: signals.abortSignal,
      fresh: values.fresh,
      resume: values.resume,
      ...(budget === undefined ? {} : { budget: { maxCredits: budget } }),
      onEvent: reporter.onEvent,
    });
  } catch (error) {
    failure = error;
  } finally {
    signals.dispose();
    await sim?.close();
  }
  // After the summary is written, a scraper may come for the final figures: unless a signal asked the run to end.
  let linger = false;
  try {
    reporter.finish(summary, failure);
    if (failure !== undefined) {
      process.stderr.write(`webdata-etl: ${inFlagWords(failure instanceof Error ? failure.message : String(failure))}\n`);
      return exitCodeFor({ error: failure });
    }
    const text = `${JSON.stringify(summary, null, 2)}\n`;
    if (stdoutTaken) process.stderr.write(text);
    else process.stdout.write(text);
    if (summaryFile !== undefined && !isStdout(summaryFile)) writeSummaryFile(summaryFile, text);
    linger = !signals.signal.aborted;
    return exitCodeFor({ summary });
  } finally {
    // Never throws: the exit code and the summary are the run's, whatever the metrics' end.
    await telemetry?.finish({ linger });
  }
}

/** The summary to `--summary-json`'s file; to a pipe or device (/dev/stdout) whose reader went away, nothing (no failure). */
function writeSummaryFile(path: string, text: string): void {
  try {
    writeOutputFile(path, text);
  } catch (error) {
    if (!readerWentAway(error, path)) throw error;
  }
}

/** The library names run() options (`fresh: true`, `budget: { maxCredits: N }`); on the command line they are flags. */
function inFlagWords(message: string): string {
  return message.replaceAll('`fresh: true`', '--fresh').replaceAll('`resume: true`', '--resume').replaceAll('`budget: { maxCredits: N }`', '--budget N');
}

