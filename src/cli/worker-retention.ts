import type { Pipeline } from '../config/define.ts';
import type { ScheduleNews } from '../recurring/worker-loop.ts';
import { stateDatabase, statePath } from '../run/outputs.ts';
import { openPruneDatabase } from '../state/open/open-prune-database.ts';
import { prune } from '../state/prune.ts';
import { spendDays, tooShortForAllowance } from '../state/retention.ts';

/**
 * What a worker does after each run of a pipeline with a `retention` (docs/schedules.md#retention): removes what the
 * retention lets go from the pipeline's state store, as `webdata-etl prune --yes` would (in batches a run at work
 * commits between), and says what it removed. A prune that fails is said and costs nothing else: the next run's end
 * tries again. Undefined: the pipeline keeps everything.
 */
export function retentionAfterRuns(pipeline: Pipeline, stateUrl: string | undefined, say: (news: ScheduleNews) => void): (() => Promise<void>) | undefined {
  const { retention } = pipeline;
  if (retention === undefined || (retention.runs === undefined && retention.spend === undefined)) return undefined;
  const days = spendDays(retention.spend);
  return async () => {
    try {
      const target = stateDatabase(pipeline, stateUrl);
      const db = await openPruneDatabase(target ? { kind: 'postgres', target, schema: pipeline.state.schema } : { kind: 'sqlite', path: statePath(pipeline) });
      try {
        // Another pipeline's allowance on the database binds the ledger too (its own was checked as the file loaded).
        const short = (await db.hasAllowances()) ? tooShortForAllowance(days) : undefined;
        if (short !== undefined) {
          say({ pipeline: pipeline.name, message: `retention: nothing removed: retention.spend ${short}` });
          return;
        }
        const report = await prune(db, [{ pipeline: pipeline.name, runs: retention.runs, spendDays: days }], { apply: true });
        const rows = Object.entries(report.rows);
        if (rows.length === 0) return;
        const runs = report.pipelines[0]?.runs.length ?? 0;
        say({ pipeline: pipeline.name, message: `retention: removed ${runs} ${runs === 1 ? "run's" : "runs'"} records (${rows.map(([kind, n]) => `${kind} ${n}`).join(', ')})` });
      } finally {
        await db.close();
      }
    } catch (error) {
      say({ pipeline: pipeline.name, message: `retention: nothing removed: ${error instanceof Error ? error.message : String(error)}` });
    }
  };
}
