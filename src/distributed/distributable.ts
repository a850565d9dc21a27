import type { Stage } from '../pipeline/compose.ts';
import { databaseOf, type Sink } from '../sinks/sink.ts';
import type { StateStore } from '../state/interfaces.ts';
import type { PostgresStateStore } from '../state/postgres/store.ts';

/** What decides whether a pipeline's run can be shared: its stages, and where its sinks write. */
export interface Shape {
  stages: readonly Stage[];
  sinks: readonly Pick<Sink<unknown>, 'commits' | 'perWorker' | 'claimsDedupeKeys'>[];
}

/**
 * The state store, if the run can be shared by many workers (docs/design.md#past-one-machine): in PostgreSQL, with
 * every sink writing inside its page transaction (on the same database) or a file of each worker's own (`perWorker`).
 * Dedupe wider than a series needs its keys claimed across workers in the page's statement: one such dedupe stage, by
 * URL (the rows' `dedupe_key`), with every sink one that writes only claimed rows (files are written before the
 * statement). Anything else cannot be shared across machines: such a run stays one process, with the pipeline's lease.
 */
export function distributable(store: StateStore, pipeline: Shape): PostgresStateStore | undefined {
  if (!('kind' in store) || store.kind !== 'postgres') return undefined;
  const sinks = pipeline.sinks;
  if (!sinks.every((sink) => databaseOf(sink) === store.database || sink.perWorker === true)) return undefined;
  const wide = wideDedupes(pipeline.stages);
  if (wide.length === 0) return store as PostgresStateStore;
  // The page's claims are all of its new keys, whatever their scope: another stage keeping keys in the store (a
  // persistent one) would mix its claims with the rows' own.
  const stored = pipeline.stages.filter((stage) => (stage as { dedupeStored?: boolean }).dedupeStored === true).length;
  const claimable = wide.length === 1 && stored === 1 && wide[0]?.dedupeByUrl === true && sinks.every((sink) => databaseOf(sink) === store.database && sink.claimsDedupeKeys === true);
  return claimable ? (store as PostgresStateStore) : undefined;
}

/** Whether a dedupe stage looks across series: its rows are then not complete per series, and a shared run claims its keys. */
export function dedupesAcrossSeries(stages: readonly Stage[]): boolean {
  return wideDedupes(stages).length > 0;
}

/** The dedupe stages that look across series (scope `query` or `global`), by the flags `dedupe()` sets on its stage. */
function wideDedupes(stages: readonly Stage[]): { dedupeByUrl?: boolean }[] {
  return stages.filter((stage) => {
    const scope = (stage as { dedupeScope?: string }).dedupeScope;
    return scope !== undefined && scope !== 'series';
  }) as { dedupeByUrl?: boolean }[];
}
