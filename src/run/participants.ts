import type { Page } from '../pipeline/page.ts';
import type { Participation, Sink } from '../sinks/sink.ts';
import type { SinkCheckpoints } from '../state/interfaces.ts';

type Of<K extends Participation<unknown>['kind']> = Extract<Participation<unknown>, { kind: K }>;

/** A sink and how it takes part, narrowed to one kind. */
export interface Taking<K extends Participation<unknown>['kind']> {
  readonly sink: Sink<unknown>;
  readonly commits: Of<K>;
}

/**
 * The run's sinks by where they take part in a page's commit (docs/design.md#the-commit-contract): `inside` its
 * transaction (rows on the state store's own database), `before` it (files, their bytes appended first; on the commit
 * thread, CSV files hand over their cells instead: `onThread`), and `after` it (deliveries, and rows in another
 * database, which their sink writes with its own checkpoint).
 */
export function participants(sinks: readonly Sink<unknown>[], storeDatabase: string, thread: boolean) {
  const inside: Taking<'rows'>[] = [];
  const before: Taking<'append'>[] = [];
  const onThread: Taking<'append'>[] = [];
  const after: Sink<unknown>[] = [];
  for (const sink of sinks) {
    const { commits } = sink;
    if (commits.kind === 'rows' && commits.database === storeDatabase) inside.push({ sink, commits });
    else if (commits.kind === 'append') (thread && commits.records ? onThread : before).push({ sink, commits });
    else after.push(sink);
  }
  return { inside, before, onThread, after };
}

/**
 * Writes a committed page to a sink on its own, outside the page's transaction: a sink after it, or a replay from the
 * journal. Each kind its own way: rows in the sink's own transaction with its checkpoint; a file's bytes appended, then
 * its checkpoint recorded (a crash in between leaves bytes past it, cut back on the next open); a delivery.
 */
export async function deliverAlone(sink: Sink<unknown>, page: Page<unknown>, seq: number, checkpoints: SinkCheckpoints): Promise<void> {
  const { commits } = sink;
  if (commits.kind === 'deliver') return commits.deliver(page, seq);
  if (commits.kind === 'rows') {
    await commits.writeAlone(commits.rows(page, seq), seq);
    return commits.committed(seq);
  }
  const appended = commits.append(page, seq);
  await checkpoints.set(sink.id, appended.checkpoint);
  commits.committed(appended.checkpoint);
}
