import { VERSION } from '../version.ts';
import { estimateCommand } from './estimate-command.ts';
import { exportCommand } from './export-command.ts';
import { pruneCommand } from './prune-command.ts';
import { reportCommand } from './report-command.ts';
import { EXIT, reportFailure } from '../run/exit-codes.ts';
import { runCommand } from './run-command.ts';
import { runsCommand } from './runs-command.ts';
import { schedulesCommand } from './schedules-command.ts';
import { spendCommand } from './spend-command.ts';
import { statusCommand } from './status-command.ts';
import { simulate } from './simulate.ts';
import { workerCommand } from './worker-command.ts';
import { UsageError } from '../errors/usage-error.ts';
import { watchStdout } from './stdout.ts';

const help = `Usage: webdata-etl <command> [options]

Harvests the Structured Public Web Data API into SQLite tables and CSV files.

Commands:
  run <pipeline>        run a pipeline (.ts/.js module or .json config); resumes an interrupted run
  worker <pipelines…>   a long-lived process that runs each pipeline when its schedule says
  schedules <files…>    the next occurrences of each pipeline's schedule
  estimate <pipeline>   worst-case requests and credits, before anything is spent
  runs <pipeline|db>    the history of a pipeline's runs, and its skipped and missed occurrences
  spend <pipeline|db>   where the credits went: by day, key or pipeline, against each key's allowance
  prune <pipeline|db>   what the pipeline's retention lets go in its state (a dry run; --yes removes it)
  status <pipeline>     a distributed run's progress and workers, and its schedule's occurrences (state in PostgreSQL)
  export <db>           analytics reports and items as CSV, JSON Lines or Parquet
  report <db>           one self-contained HTML page with charts
  simulate              run the local API simulator

Options:
  -h, --help     show help (also after a command: webdata-etl run --help)
  -v, --version  show the version

Environment: WEBDATA_BASE_URL (the API's {base_url}), WEBDATA_API_KEY (or WEBDATA_TOKEN), HTTPS_PROXY, NO_PROXY.
Exit codes: 0 finished, 1 unexpected, 2 invalid configuration or usage, 3 authentication (401),
4 plan/permission/credits/quota, 5 failed series, 75 try again later, 130 interrupted. See webdata-etl run --help.
`;

const commands: Record<string, (args: string[]) => Promise<number>> = {
  run: runCommand,
  worker: workerCommand,
  schedules: schedulesCommand,
  estimate: estimateCommand,
  runs: runsCommand,
  spend: spendCommand,
  prune: pruneCommand,
  status: statusCommand,
  export: exportCommand,
  report: reportCommand,
  simulate: async (args) => {
    await simulate(args);
    return EXIT.ok;
  },
};

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    process.stdout.write(help);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (command === '-v' || command === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return EXIT.ok;
  }
  const handler = commands[command];
  if (!handler) throw new UsageError(`unknown command "${command}"; expected one of: ${Object.keys(commands).join(', ')} (see --help)`);
  return handler(rest);
}

/** The command line: runs the command `argv` names and sets `process.exitCode`. */
export async function runCli(argv: string[]): Promise<void> {
  // A reader that goes away (`| head`) ends what a command writes to stdout, quietly: no unhandled EPIPE.
  watchStdout();
  try {
    process.exitCode = await main(argv);
  } catch (error) {
    // Bad usage and bad input are the user's to fix: a message, no stack trace.
    process.exitCode = reportFailure(error);
  }
}
