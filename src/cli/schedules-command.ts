import { parseArgs } from 'node:util';
import { loadPipeline } from '../config/load-pipeline.ts';
import { UsageError } from '../errors/usage-error.ts';
import { inZone, occurrencesOf } from '../recurring/occurrences.ts';
import type { Schedule } from '../recurring/schedule-config.ts';
import { EXIT } from '../run/exit-codes.ts';
import { occurrenceShares, sharesText, spreadLines } from './spread-shares.ts';

export const schedulesHelp = `Usage: webdata-etl schedules <pipeline files…> [--count N] [--json]

The next occurrences of each pipeline's schedule (schedule: { cron, timezone, missed }; docs/schedules.md), in its
time zone and in UTC: when \`webdata-etl worker\` will run it. With an allowance spread evenly (allowance.spread:
'even'; docs/credits.md#spreading-an-allowance), each occurrence's share of it, as planned: the period's allowance
over its occurrences. What became of past ones: webdata-etl runs.

Options:
  --count <n>  how many occurrences per pipeline (default 5)
  --json       one JSON object per pipeline
  -h, --help   show this help
`;

/** `webdata-etl schedules <files…>`. */
export async function schedulesCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: { count: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(schedulesHelp);
    return EXIT.ok;
  }
  if (positionals.length === 0) throw new UsageError('schedules needs one or more pipeline files: webdata-etl schedules pipelines/rank-tracking.ts (see --help)');
  const count = values.count === undefined ? 5 : Number(values.count);
  if (!Number.isInteger(count) || count < 1 || count > 1000) throw new UsageError(`--count must be a whole number from 1 to 1000; got "${values.count}"`);
  const now = Date.now();
  for (const file of positionals) {
    const pipeline = await loadPipeline(file);
    const schedule = pipeline.schedule;
    const upcoming = schedule ? occurrencesOf(schedule).upcoming(count, now) : [];
    // A spread allowance: each occurrence's share as planned (docs/credits.md#spreading-an-allowance).
    const shares = occurrenceShares(pipeline, upcoming);
    const next = upcoming.map((at, index) => ({
      at: new Date(at).toISOString(),
      local: inZone(at, (schedule as Schedule).timezone),
      ...(shares[index]?.length ? { shares: shares[index] } : {}),
    }));
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ pipeline: pipeline.name, file, schedule: schedule ?? null, next })}\n`);
      continue;
    }
    if (!schedule) {
      process.stdout.write(`${pipeline.name} (${file}): no schedule: it runs when started\n`);
      continue;
    }
    process.stdout.write(`${pipeline.name} (${file}): "${schedule.cron}" in ${schedule.timezone}, missed: ${schedule.missed}\n`);
    for (const line of spreadLines(pipeline)) process.stdout.write(`${line}\n`);
    if (next.length === 0) process.stdout.write('  no occurrence to come\n');
    for (const occurrence of next) process.stdout.write(`  ${occurrence.local}  (${occurrence.at})${occurrence.shares ? `  ${sharesText(occurrence.shares)}` : ''}\n`);
  }
  return EXIT.ok;
}
