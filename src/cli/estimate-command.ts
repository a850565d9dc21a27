import { parseArgs } from 'node:util';
import { estimate } from '../schedule/estimate.ts';
import { EXIT } from '../run/exit-codes.ts';
import { loadPipeline } from '../config/load-pipeline.ts';
import { UsageError } from '../errors/usage-error.ts';
import { stateDatabase, statePath } from '../run/outputs.ts';
import { stateUrlFrom } from './database-filters.ts';
import { allowanceLines, estimateAllowance } from './estimate-allowance.ts';
import { estimatePool, poolLines } from './estimate-keys.ts';
import { estimateShareLine, estimateShares } from './spread-shares.ts';
import { estimateRefresh, refreshLines } from './estimate-refresh.ts';

export const estimateHelp = `Usage: webdata-etl estimate <pipeline.ts|pipeline.json> [--json]

Prints the worst case of a pipeline before anything is spent: series, pages per series, requests and credits,
and whether the worst case fits the budget; with keys in the environment (WEBDATA_API_KEYS, its _FILE, or
WEBDATA_API_KEY), each key's rate (keys.<label> or the pipeline's rate) and the worst case's time at their sum;
where the pipeline or its state database has an allowance for its keys, how much of what is left of each key's
allowance in its period the worst case would take (read from the state database, never written); with an allowance
spread evenly over the schedule (allowance.spread: 'even'), the next occurrence's share of it, as planned; with
refresh.priority "changes", what the next run's refresh plan would fetch and why (series chosen and skipped by
reason, pages expected under the budget), from each series' history in the state database.
Sends nothing, opens no output, shows no key.

Options:
  --json         print the estimate as JSON
  --state <url>  the pipeline's state is in this PostgreSQL database (as for run; or WEBDATA_STATE_URL)
  -h, --help     show this help
`;

export async function estimateCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    strict: true,
    allowPositionals: true,
    options: { json: { type: 'boolean' }, state: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(estimateHelp);
    return EXIT.ok;
  }
  const [file] = positionals;
  if (!file || positionals.length > 1) throw new UsageError('estimate takes one pipeline file: webdata-etl estimate pipelines/rank-tracking.ts');
  const pipeline = await loadPipeline(file);
  const plan = pipeline.source.plan();
  function* units() {
    for (let i = 0; i < plan.seriesCount; i++) yield { path: plan.endpoint, maxRequests: plan.maxPages };
  }
  const worst = estimate(units(), { weights: pipeline.credits.weights, budget: pipeline.budget ?? null });
  const dropped = (pipeline.source as { dropped?: { blank: number; duplicate: number } }).dropped;
  // The environment's keys, by label, with their rates: the worst case's time (none without a key, as before pools).
  const pool = estimatePool(pipeline, worst.requests, process.env);
  // What is left of the keys' allowances in their periods, as the state database has it (docs/credits.md#allowances).
  const state = stateDatabase(pipeline, stateUrlFrom(values.state, process.env.WEBDATA_STATE_URL)) ?? statePath(pipeline);
  const allowance = await estimateAllowance(pipeline, worst.credits, process.env, state, Date.now(), (message) => process.stderr.write(`webdata-etl: ${message}\n`));
  // A spread allowance: the next occurrence's share of it, as planned (docs/credits.md#spreading-an-allowance).
  const spread = estimateShares(pipeline, Date.now());
  // The refresh plan the next run would make from the state's history (docs/pipelines.md#the-refresh-planner).
  const refresh = await estimateRefresh(pipeline, plan, state);
  const result = {
    pipeline: pipeline.name,
    endpoint: plan.endpoint,
    series: plan.seriesCount,
    maxPagesPerSeries: plan.maxPages,
    ...worst,
    ...(dropped ? { droppedQueries: dropped } : {}),
    ...(pool ? { keys: pool } : {}),
    ...(allowance ? { allowance } : {}),
    ...(spread ? { share: spread } : {}),
    ...(refresh ? { refresh } : {}),
  };
  if (values.json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return EXIT.ok;
  }
  const lines = [
    `pipeline: ${result.pipeline}`,
    `series: ${result.series}`,
    `pages per series: at most ${result.maxPagesPerSeries}`,
    `requests (worst case): ${result.requests}`,
    `credits (worst case): ${result.credits}`,
    `budget: ${result.budget === null ? 'none' : `${result.budget} (${budgetFit(result.withinBudget, refresh !== undefined)})`}`,
  ];
  if (pool) lines.push(...poolLines(pool));
  if (allowance) lines.push(...allowanceLines(allowance));
  if (spread) lines.push(estimateShareLine(spread));
  if (refresh) lines.push(...refreshLines(refresh));
  if (dropped && (dropped.blank || dropped.duplicate)) lines.push(`queries dropped: ${dropped.duplicate} duplicate, ${dropped.blank} blank`);
  process.stdout.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}

/** Whether the worst case fits the budget; with a refresh plan, a budget smaller than it is what the plan spends. */
function budgetFit(within: boolean, planned: boolean): string {
  if (within) return 'the worst case fits';
  return planned ? 'the worst case does not fit: the refresh plan chooses the series it pays for' : 'the worst case does not fit: the run will stop on its budget';
}
