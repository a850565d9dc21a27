#!/usr/bin/env node
import { ValidationError } from '../client/errors.ts';
import { VERSION } from '../version.ts';
import { simulate } from './simulate.ts';
import { UsageError } from './usage-error.ts';

const help = `Usage: webdata-etl <command> [options]

Commands:
  simulate     run the local API simulator

Options:
  -h, --help     show help (also after a command)
  -v, --version  show the version

Exit codes: 0 done, 1 failed, 2 bad usage or configuration.
`;

const commands: Record<string, (args: string[]) => Promise<void>> = { simulate };

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    process.stdout.write(help);
    return;
  }
  if (command === '-v' || command === '--version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  const run = commands[command];
  if (!run) throw new UsageError(`unknown command "${command}"; expected one of: ${Object.keys(commands).join(', ')}`);
  await run(rest);
}

try {
  await main(process.argv.slice(2));
} catch (error) {
  // Bad usage and bad input are the user's to fix: a message, no stack trace.
  const usage = error instanceof UsageError || error instanceof ValidationError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
  process.stderr.write(`webdata-etl: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = usage ? 2 : 1;
}
