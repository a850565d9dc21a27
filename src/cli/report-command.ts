import { parseArgs } from 'node:util';
import { renderReport, writeReport } from '../report/report.ts';
import { checkOutputPath } from '../output-file.ts';
import { isPostgresDatabase } from '../analytics/reader.ts';
import { DATABASE_HELP, FILTER_OPTIONS, filtersFrom, oneDatabase } from './database-filters.ts';
import { EXIT } from '../run/exit-codes.ts';
import { UsageError } from '../errors/usage-error.ts';
import { isStdout, outputName, readerWentAway, writeStdout } from './stdout.ts';

export const reportHelp = `Usage: webdata-etl report <db> --out <report.html> [options]

Makes one self-contained HTML page from a pipeline's output (SQLite or PostgreSQL): the run summary, credits per run, the
distribution of ranks, top domains, rank histories and country overlap. Nothing is fetched when it is viewed.

Options:
  --out <file>      where to write the page (required; -: stdout): a file is written whole or not at all,
                    created 0600; a pipe or device (/dev/stdout) as it comes; the database being read is refused
  --query <q>       only this query
  --country <cc>    only this country
  --table <name>    the results table (default results)
  -h, --help        show this help

${DATABASE_HELP}
`;

export async function reportCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: { out: { type: 'string' }, ...FILTER_OPTIONS, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(reportHelp);
    return EXIT.ok;
  }
  const database = oneDatabase(positionals, 'report', 'webdata-etl report data/rank.sqlite --out report.html', values['database-url']);
  if (!values.out) throw new UsageError('report needs --out <report.html> (or --out - for stdout)');
  if (isStdout(outputName(values.out))) {
    // Written as it is once made: a reader that goes away before its end (EPIPE) ends nothing but the writing.
    const html = await renderReport({ database, ...filtersFrom(values) });
    await writeStdout(html);
    process.stderr.write(`report → stdout (${Math.round(Buffer.byteLength(html) / 1024)} KB)\n`);
    return EXIT.ok;
  }
  // writeReport checks it too, as "out"; here the message names the flag the user typed.
  checkOutputPath(values.out, { field: '--out', databases: isPostgresDatabase(database) ? [] : [database] });
  let bytes: number;
  try {
    ({ bytes } = await writeReport({ database, out: values.out, ...filtersFrom(values) }));
  } catch (error) {
    // A pipe or device (/dev/stdout, a FIFO) whose reader went away: the page is done with, which is no failure.
    if (readerWentAway(error, values.out)) return EXIT.ok;
    throw error;
  }
  process.stderr.write(`report → ${values.out} (${Math.round(bytes / 1024)} KB)\n`);
  return EXIT.ok;
}
