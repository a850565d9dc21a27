import { parseArgs } from 'node:util';
import { writeReport } from '../report/report.ts';
import { EXIT } from './exit-codes.ts';
import { UsageError } from './usage-error.ts';

export const reportHelp = `Usage: webdata-etl report <db> --out <report.html> [options]

Makes one self-contained HTML page from a pipeline's SQLite output: the run summary, credits per run, the
distribution of ranks, top domains, rank histories and country overlap. Nothing is fetched when it is viewed.

Options:
  --out <file>      where to write the page (required)
  --query <q>       only this query
  --country <cc>    only this country
  --table <name>    the results table (default results)
  -h, --help        show this help
`;

export async function reportCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: { out: { type: 'string' }, query: { type: 'string' }, country: { type: 'string' }, table: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(reportHelp);
    return EXIT.ok;
  }
  const [database] = positionals;
  if (!database || positionals.length > 1) throw new UsageError('report takes one database: webdata-etl report data/rank.sqlite --out report.html');
  if (!values.out) throw new UsageError('report needs --out <report.html>');
  const { bytes } = writeReport({
    database,
    out: values.out,
    ...(values.query !== undefined ? { query: values.query } : {}),
    ...(values.country !== undefined ? { country: values.country } : {}),
    ...(values.table ? { table: values.table } : {}),
  });
  process.stderr.write(`report → ${values.out} (${Math.round(bytes / 1024)} KB)\n`);
  return EXIT.ok;
}
