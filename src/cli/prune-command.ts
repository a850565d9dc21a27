import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isPostgresDatabase } from '../analytics/reader.ts';
import { UsageError } from '../errors/usage-error.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { postgresNameSchema, postgresTarget, type PostgresTarget } from '../postgres/target.ts';
import { EXIT } from '../run/exit-codes.ts';
import { openPruneDatabase } from '../state/open/open-prune-database.ts';
import { prune, type PruneDatabase, type PrunePolicy, type PruneReport } from '../state/prune.ts';
import { type Retention, retentionSchema, spendDays, tooShortForAllowance } from '../state/retention.ts';
import { duration } from './progress.ts';
import { stateDatabaseArgument } from './state-argument.ts';

export const pruneHelp = `Usage: webdata-etl prune <pipeline.ts|pipeline.json|state.sqlite|postgres://…> [--yes] [--json]

Removes from a state database what a pipeline's retention lets go (docs/pipelines.md#retention): the records of
its runs older than its last \`retention.runs\` (the runs row, its series and their stage state, its journal entries,
where its sinks began, its sightings, its delivered notifications and its settled occurrences), and the spend
ledger's rows older than \`retention.spend\`. The latest run, a run that may resume and a run holding credits of an
allowance are always kept; results tables and their outcomes tables are never touched.
A dry run by default: says what would go (rows by kind, and about how many bytes). --yes removes it, 1,000 rows
a transaction, so that a run at work on the same database commits between the batches.
Given a pipeline file, prunes its state store by its retention; given a database, prunes every pipeline in it
(or --pipeline's) by --runs and --spend.

Options:
  --yes                  remove (else a dry run: nothing changes)
  --json                 the report as one JSON object
  --runs <n>             keep each pipeline's last n runs (in place of retention.runs)
  --spend <days>         keep the spend ledger this long: 400d, or forever (in place of retention.spend); at least
                         400d while a key's allowance is declared in the database
  --pipeline <name>      given a database: this pipeline only
  --state <url>          the pipeline's state is in this PostgreSQL database (as for run; or WEBDATA_STATE_URL)
  --state-schema <name>  PostgreSQL: the schema of the run state (default webdata, or the pipeline's state.schema)
  --database-url <url>   a PostgreSQL state database, in place of the file argument
  -h, --help             show this help
`;

const OPTIONS = {
  yes: { type: 'boolean' },
  json: { type: 'boolean' },
  runs: { type: 'string' },
  spend: { type: 'string' },
  pipeline: { type: 'string' },
  state: { type: 'string' },
  'state-schema': { type: 'string' },
  'database-url': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** --runs and --spend, checked as a pipeline's `retention` is (each problem named by its flag). */
function retentionFlags(values: { runs?: string | undefined; spend?: string | undefined }): Retention {
  const runs = values.runs === undefined ? undefined : /^[0-9]+$/.test(values.runs) ? Number(values.runs) : NaN;
  const parsed = retentionSchema.safeParse({ ...(runs === undefined ? {} : { runs }), ...(values.spend === undefined ? {} : { spend: values.spend }) });
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const flag = issue?.path[0] === 'runs' ? '--runs' : '--spend';
  throw new UsageError(`${flag} ${issue?.message ?? 'is not valid'} (got "${flag === '--runs' ? values.runs : values.spend}")`);
}

/** The database and the policies: a pipeline file's retention (the flags over it), or the flags for a database's pipelines. */
async function target(positionals: string[], values: Record<string, string | boolean | undefined>) {
  const flags = retentionFlags(values as { runs?: string; spend?: string });
  const argument = await stateDatabaseArgument('prune', positionals, values as { state?: string; 'state-schema'?: string; 'database-url'?: string });
  if (argument.pipeline !== undefined && values.pipeline !== undefined && values.pipeline !== argument.pipeline) {
    throw new UsageError(`--pipeline ${String(values.pipeline)} is not the file's pipeline (${argument.pipeline}): give the state database to prune another`);
  }
  const retention: Retention = { ...argument.retention, ...flags };
  if (argument.pipeline === undefined && flags.runs === undefined && flags.spend === undefined) {
    throw new UsageError('a database holds no retention: give --runs <n> and/or --spend <days> (or a pipeline file whose retention says)');
  }
  const only = argument.pipeline ?? (values.pipeline as string | undefined);
  return { database: argument.database, stateSchema: argument.stateSchema, only, retention, fromFlags: flags };
}

async function open(database: string | PostgresTarget, stateSchema: string | undefined): Promise<PruneDatabase> {
  const schema = ValidationError.parse(postgresNameSchema.default('webdata'), stateSchema, 'Invalid database', 'stateSchema');
  if (typeof database !== 'string') return openPruneDatabase({ kind: 'postgres', target: database, schema });
  if (isPostgresDatabase(database)) return openPruneDatabase({ kind: 'postgres', target: postgresTarget(database === 'postgres:' || database === 'postgresql:' ? undefined : database), schema });
  return openPruneDatabase({ kind: 'sqlite', path: database });
}

export async function pruneCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, strict: true, allowPositionals: true, options: OPTIONS });
  if (values.help) {
    process.stdout.write(pruneHelp);
    return EXIT.ok;
  }
  const { database, stateSchema, only, retention, fromFlags } = await target(positionals, values);
  // A pipeline that never ran has no state file yet: nothing to prune, as `spend` says of nothing spent.
  if (typeof database === 'string' && !isPostgresDatabase(database) && !existsSync(database)) {
    process.stderr.write(`nothing to prune: ${database} does not exist (no run has kept its state there yet)\n`);
    return EXIT.ok;
  }
  const db = await open(database, stateSchema);
  try {
    const days = spendDays(retention.spend);
    // The floor a pipeline's own allowance sets is its schema's; here, any key's allowance the database records.
    const short = (await db.hasAllowances()) ? tooShortForAllowance(days) : undefined;
    if (short !== undefined) {
      throw new ValidationError('Invalid retention', [{ path: fromFlags.spend === undefined ? 'retention.spend' : '--spend', message: short }]);
    }
    const pipelines = only === undefined ? await db.pipelines() : [only];
    const policies: PrunePolicy[] = pipelines.map((pipeline) => ({ pipeline, runs: retention.runs, spendDays: days }));
    const started = Date.now();
    const report = await prune(db, policies, { apply: values.yes === true });
    if (values.json) process.stdout.write(`${JSON.stringify({ dryRun: values.yes !== true, ...report })}\n`);
    else writeReport(report, values.yes === true, Date.now() - started);
    return EXIT.ok;
  } finally {
    await db.close();
  }
}

/** About how many bytes, as a person reads them. */
function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

function writeReport(report: PruneReport, applied: boolean, ms: number): void {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`${report.database}: ${applied ? `removed in ${duration(ms)}` : 'a dry run, nothing removed (--yes removes it)'}`);
  for (const { pipeline, runs, kept } of report.pipelines) {
    out(`  ${pipeline.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?')}: ${runs.length} ${runs.length === 1 ? "run's" : "runs'"} records ${applied ? 'removed' : 'to remove'}, ${kept} kept`);
  }
  const rows = Object.entries(report.rows);
  if (rows.length === 0) out(`  nothing ${applied ? 'was' : 'would be'} removed`);
  const width = Math.max(0, ...rows.map(([kind]) => kind.length));
  for (const [kind, n] of rows) out(`  ${kind.padEnd(width)}  ${n} row${n === 1 ? '' : 's'}`);
  if (report.bytes !== null && rows.length > 0) out(`  about ${size(report.bytes)}${applied && report.store === 'sqlite' ? ' (reused by the file; VACUUM shrinks it)' : ''}`);
}
