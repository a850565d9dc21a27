import { parseArgs } from 'node:util';
import { exportReport, REPORT_NAMES } from '../analytics/export.ts';
import { checkOutputPath } from '../output-file.ts';
import { isPostgresDatabase } from '../analytics/reader.ts';
import { DATABASE_HELP, FILTER_OPTIONS, filtersFrom, oneDatabase } from './database-filters.ts';
import { EXIT } from '../run/exit-codes.ts';
import { UsageError } from '../errors/usage-error.ts';
import { isStdout, outputName, readerWentAway } from './stdout.ts';

export const exportHelp = `Usage: webdata-etl export <db> --report <report> [options]

Streams a report out of a pipeline's output (SQLite or PostgreSQL): analytics views, or the items themselves.

Reports:
  rankings   the latest complete rankings per (query, country, lang)
  domains    domain share per query and country: results, best and average rank, share
  overlap    how alike countries' top 10 are for each query (Jaccard similarity of URLs)
  changes    what changed between each series' last two complete runs: new, lost, up, down (with the
             rank delta), same; failed for a series whose latest run did not complete
  spend      requests and credits per run, query, country and endpoint
  items      every row of the results table

Options:
  --report <report>    one of ${REPORT_NAMES.join(', ')} (required)
  --format <format>    csv (default), jsonl or parquet
  --out <file>         where to write (default, or - or /dev/stdout: stdout; Parquet needs a file): a file is
                       written whole or not at all, created 0600; a pipe or device as it comes; the database
                       being read is refused
  --query <q>          only this query
  --country <cc>       only this country
  --table <name>       the results table (default results)
  -h, --help           show this help

${DATABASE_HELP}
`;

export async function exportCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      report: { type: 'string' },
      format: { type: 'string' },
      out: { type: 'string' },
      ...FILTER_OPTIONS,
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(exportHelp);
    return EXIT.ok;
  }
  const database = oneDatabase(positionals, 'export', 'webdata-etl export data/rank.sqlite --report rankings', values['database-url']);
  if (!values.report) throw new UsageError(`export needs --report (${REPORT_NAMES.join(', ')})`);
  // Parquet is written through a file descriptor: to a pipe only by a name that opens (a FIFO), never as stdout.
  const out = values.format === 'parquet' ? values.out : outputName(values.out);
  const toStdout = out === undefined || isStdout(out);
  // exportReport checks it too, as "out"; here the message names the flag the user typed.
  if (!toStdout) checkOutputPath(out as string, { field: '--out', databases: isPostgresDatabase(database) ? [] : [database] });
  let rows: number;
  try {
    ({ rows } = await exportReport({
      database,
      report: values.report as (typeof REPORT_NAMES)[number],
      ...(values.format ? { format: values.format as 'csv' } : {}),
      out: toStdout ? process.stdout : (out as string),
      ...filtersFrom(values),
    }));
  } catch (error) {
    // `| head` read what it wanted and went: the export is done with, which is no failure.
    if (readerWentAway(error, out)) return EXIT.ok;
    throw error;
  }
  process.stderr.write(`${rows} rows${toStdout ? '' : ` → ${values.out}`}\n`);
  return EXIT.ok;
}
