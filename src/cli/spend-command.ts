import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { keyAllowancesAt } from '../analytics/key-allowances.ts';
import { isPostgresDatabase, openReader } from '../analytics/reader.ts';
import { KEY_SPEND_VIEW } from '../analytics/views.ts';
import { UsageError } from '../errors/usage-error.ts';
import { EXIT } from '../run/exit-codes.ts';
import { SPEND_BY, type SpendBy, type SpendLine, SpendLines } from './spend-lines.ts';
import { stateDatabaseArgument } from './state-argument.ts';
import { spendStatements as sql } from './statements.ts';

export const spendHelp = `Usage: webdata-etl spend <pipeline.ts|pipeline.json|state.sqlite|postgres://…> [--by day|key|pipeline] [--json]

Where the credits went, from the state database's webdata_spend view: credits and requests by day and key
(--by day, the default), by key and allowance period (--by key: each allowance's current period too, spent or
not), or by pipeline, key and period (--by pipeline); with each key's allowance, what is left of its period now,
and the line's share of the allowance. Every pipeline whose state is in the database is counted: an allowance
is theirs together. Days are on the clocks of the key's allowance, else UTC. Keys are shown by label; the key
itself is never stored.
Given a pipeline file, reads its state store; given a database, reads it.

Options:
  --by <day|key|pipeline>  how the credits are grouped (default day)
  --json                   one JSON object per line
  --state <url>            the pipeline's state is in this PostgreSQL database (as for run; or WEBDATA_STATE_URL)
  --state-schema <name>    PostgreSQL: the schema of the run state (default webdata, or the pipeline's state.schema);
                           --schema is the same here (spend reads the run state alone)
  --database-url <url>     a PostgreSQL state database, in place of the file argument
  -h, --help               show this help
`;

/** `--by`, checked: one of SPEND_BY, else a usage error naming them (exit 2). */
function spendBy(value: string | undefined): SpendBy {
  if (value === undefined) return 'day';
  if ((SPEND_BY as readonly string[]).includes(value)) return value as SpendBy;
  throw new UsageError(`--by must be one of ${SPEND_BY.join(', ')} (got "${value}")`);
}

/** `--state-schema`, or `--schema` as its other name; both, differing, is a usage error. */
function stateSchemaFlag(values: { schema?: string | undefined; 'state-schema'?: string | undefined }): string | undefined {
  const { schema, 'state-schema': stateSchema } = values;
  if (schema !== undefined && stateSchema !== undefined && schema !== stateSchema) {
    throw new UsageError('--schema and --state-schema name the same schema here (the run state): give one of them');
  }
  return stateSchema ?? schema;
}

export async function spendCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: {
      by: { type: 'string' },
      json: { type: 'boolean' },
      state: { type: 'string' },
      'state-schema': { type: 'string' },
      schema: { type: 'string' },
      'database-url': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(spendHelp);
    return EXIT.ok;
  }
  const by = spendBy(values.by);
  const { database, stateSchema } = await stateDatabaseArgument('spend', positionals, { ...values, 'state-schema': stateSchemaFlag(values) });
  if (typeof database === 'string' && !isPostgresDatabase(database) && !existsSync(database)) return nothingYet(`${database} does not exist`);
  const reader = await openReader(database, { stateSchema });
  const lines = new SpendLines(by);
  try {
    // The view is made by a run of this webdata-etl as it opens the store: a database no such run opened has none.
    if (!(await reader.exists(KEY_SPEND_VIEW, 'state'))) return nothingYet(`${reader.label} has no ${KEY_SPEND_VIEW} view: the next run on it makes it`);
    for await (const row of reader.iterate(sql.rows(reader.name(KEY_SPEND_VIEW, 'state')))) lines.add(row);
    if (by === 'key') lines.addCurrentPeriods(await keyAllowancesAt(reader, Date.now()));
  } finally {
    await reader.close();
  }
  const shown = lines.lines();
  if (values.json) {
    for (const line of shown) process.stdout.write(`${JSON.stringify(line)}\n`);
    return EXIT.ok;
  }
  if (shown.length === 0) return nothingYet('no credits spent');
  writeTable(by, shown);
  return EXIT.ok;
}

/** Nothing to show, said on stderr (stdout stays empty, as `--json`'s would be). */
function nothingYet(why: string): number {
  process.stderr.write(`no spend yet (${why})\n`);
  return EXIT.ok;
}

/** A cell of the table: a number as it reads (2 decimals at most), a label without a control character (a terminal's escapes). */
function cell(value: string | number | null): string {
  if (value === null) return '-';
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : value.toFixed(2).replace(/0+$/, '').replace(/\.$/, '');
  return value.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

function writeTable(by: SpendBy, lines: readonly SpendLine[]): void {
  const first = by === 'day' ? ['day', 'key'] : by === 'pipeline' ? ['pipeline', 'key', 'period'] : ['key', 'period'];
  const table = [[...first, 'credits', 'requests', 'allowance', 'left', 'share']];
  for (const line of lines) {
    const leading = by === 'day' ? [line.day ?? '', line.key ?? '(none)'] : by === 'pipeline' ? [line.pipeline ?? '', line.key ?? '(none)', line.period] : [line.key ?? '(none)', line.period];
    const allowance = line.allowance === null ? null : `${cell(line.allowance.credits)}/${line.allowance.per} (${cell(line.allowance.timezone)})`;
    table.push([...leading.map(cell), cell(line.credits), cell(line.requests), cell(allowance), cell(line.left), line.share === null ? '-' : `${cell(Math.round(line.share * 1000) / 10)}%`]);
  }
  const widths = (table[0] as string[]).map((_, i) => Math.max(...table.map((row) => (row[i] as string).length)));
  for (const row of table) process.stdout.write(`${row.map((value, i) => value.padEnd(widths[i] as number)).join('  ').trimEnd()}\n`);
}
