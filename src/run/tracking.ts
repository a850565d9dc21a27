import { SEARCH_PATH } from '../client/client.ts';
import type { Pipeline } from '../config/define.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { hostsIn, tracking, type Tracking } from '../pipeline/tracked-domains.ts';
import type { SourcePlan } from '../sources/source.ts';

type Problem = { path: string; message: string };

/** The pipeline's tracking (`track`, `refresh`), or none (docs/pipelines.md#tracked-domains-and-depth-until-found). */
export function pipelineTracking(pipeline: Pick<Pipeline, 'track' | 'refresh'>): Tracking | undefined {
  return pipeline.track ? tracking(pipeline.track, pipeline.refresh, SEARCH_PATH) : undefined;
}

/**
 * What `track` needs of the rest of the pipeline, checked before the run opens anything (exit 2, no credit spent):
 * series with queries (the search source), items with ranks and domains (`normalize()`), every item of a series kept
 * (no dedupe wider than the series or across runs: a domain seen elsewhere would read as not found), and a `column`
 * the queries file has.
 */
export function checkTracking(pipeline: Pipeline, plan: SourcePlan): void {
  const track = pipeline.track;
  if (!track) return;
  const problems: Problem[] = [];
  const endpoints = plan.endpoint.split(', ');
  if (!endpoints.includes(SEARCH_PATH)) {
    problems.push({ path: 'track', message: `needs a search source (searchPages, "search" in a JSON config), whose series are queries: this source pages ${plan.endpoint}` });
  }
  const terms = pipeline.stages.map((stage) => (stage as { terms?: { stage?: unknown; scope?: unknown; persistent?: unknown } }).terms);
  if (!terms.some((t) => t?.stage === 'normalize')) {
    problems.push({ path: 'track', message: 'needs the normalize() stage: a tracked domain is matched against the items\' domain and rank columns' });
  }
  if (terms.some((t) => t?.stage === 'dedupe' && (t.scope !== 'series' || t.persistent === true))) {
    problems.push({ path: 'track', message: 'cannot be used with a dedupe wider than the series or across runs: a domain already seen elsewhere would read as not found; use dedupe({ scope: "series" })' });
  }
  if (track.column !== undefined && !(plan.tagColumns ?? []).includes(track.column)) {
    const columns = plan.tagColumns ?? [];
    problems.push({
      path: 'track.column',
      message: columns.length > 0
        ? `"${track.column}" is not a column of the queries file: it has ${columns.map((c) => `"${c}"`).join(', ')}`
        : `"${track.column}" is not a column of the queries file: the queries have no tag columns (give queriesFile with a column of domains, or track.domains)`,
    });
  }
  // A cell that names something other than hosts is a mistake in the file, said before anything is spent.
  else if (track.column !== undefined) problems.push(...badCells(plan, track.column));
  if (problems.length > 0) throw new ValidationError(`Pipeline "${pipeline.name}" cannot track domains`, problems);
}

/** The first few queries whose cell of `column` holds a word that is not a host name. */
function badCells(plan: SourcePlan, column: string): Problem[] {
  const problems: Problem[] = [];
  for (const series of plan.series()) {
    const bad = hostsIn(series.tags?.[column]).bad;
    if (bad.length > 0 && !problems.some((p) => p.message.startsWith(`the query "${series.query}"`))) {
      problems.push({ path: 'track.column', message: `the query "${series.query}" has ${bad.map((word) => `"${word}"`).join(', ')} in "${column}": each must be a host name such as example.com` });
    }
    if (problems.length >= 3) break;
  }
  return problems;
}
