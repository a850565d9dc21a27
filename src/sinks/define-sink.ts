import type { Page } from '../pipeline/page.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';
import type { Sink, SinkContext } from './sink.ts';

/** What a sink of your own decides: where it writes, and how a page is written. */
export interface SinkSpec<I = NormalizedItem> {
  /** What kind of output it is, e.g. `webhook`, `array`. */
  kind: string;
  /** What it writes to, for messages and the summary (a URL without credentials, a name); default `kind`. */
  target?: string;
  /**
   * Whether writing the same page twice (the same `seq`) has the effect of writing it once — an upsert keyed by
   * `page.key`, say. Then delivery is exactly once; otherwise at least once (see `defineSink`).
   */
  idempotent?: boolean;
  open?(ctx: SinkContext): void | Promise<void>;
  /** Writes one page. `seq` is its place in the run's journal: increasing, the same if the page comes again. */
  write(page: Page<I>, seq: number): void | Promise<void>;
  close?(): void | Promise<void>;
}

/**
 * A sink from what it must decide (`open`, `write`, `close`), with the plumbing of delivery provided: the last page
 * it holds is checkpointed in the state store after each write, and after a crash the runner re-delivers from the
 * journal every committed page past that checkpoint, so a page is never missed. A page written just before a kill,
 * and not yet checkpointed, comes again on resume: at least once — exactly once when `write` is idempotent.
 */
export function defineSink<I = NormalizedItem>(spec: SinkSpec<I>): Sink<I> {
  const target = spec.target ?? spec.kind;
  const id = `${spec.kind}:${target}`;
  let checkpoints: SinkContext['stateCheckpoints'] | undefined;
  let held = 0;
  return {
    kind: spec.kind,
    path: target,
    // The target is for messages (a URL, a name): never a file, so never where the state store goes.
    writesFile: false,
    id,
    terms: { target },
    delivery: spec.idempotent ? 'exactly_once' : 'at_least_once',
    async open(ctx) {
      checkpoints = ctx.stateCheckpoints;
      // Seen for the first time: it holds nothing of the past, and owes nothing of it either.
      held = (await checkpoints.get(id))?.seq ?? ctx.currentSeq;
      await checkpoints.set(id, { seq: held, bytes: null });
      await spec.open?.(ctx);
    },
    held: () => held,
    commits: {
      kind: 'deliver',
      async deliver(page, seq) {
        await spec.write(page, seq);
        await checkpoints?.set(id, { seq, bytes: null });
        held = seq;
      },
    },
    async close() {
      await spec.close?.();
    },
  };
}
