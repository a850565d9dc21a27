import { appendToFile } from '../commits/file-appends.ts';
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
 * The run's sinks by where they take part in a page's commit (docs/design.md#the-commit-contract), three ways: `inside`
 * its transaction (rows on the state store's own database), `before` it with a checkpoint in it (files: their bytes
 * handed to the store, which appends them first), and `after` it (deliveries, and rows in another database, which
 * their sink writes with its own checkpoint).
 */
export function participants(sinks: readonly Sink<unknown>[], storeDatabase: string) {
  const inside: Taking<'rows'>[] = [];
  const before: Taking<'append'>[] = [];
  const after: Sink<unknown>[] = [];
  for (const sink of sinks) {
    const { commits } = sink;
    if (commits.kind === 'rows' && commits.database === storeDatabase) inside.push({ sink, commits });
    else if (commits.kind === 'append') before.push({ sink, commits });
    else after.push(sink);
  }
  return { inside, before, after };
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
  const checkpoint = { seq, bytes: appendToFile(commits.append(page)).length };
  await checkpoints.set(sink.id, checkpoint);
  commits.committed(checkpoint);
}
