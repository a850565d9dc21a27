import { definePipeline, type Pipeline, type PipelineDefinition, type TypedDefinition } from '../config/define.ts';
import type { ItemsAfter } from '../pipeline/chain.ts';
import type { AnyStage } from '../pipeline/compose.ts';
import { ValidationError } from '../errors/validation-error.ts';
import type { Page } from '../pipeline/page.ts';
import type { Sink } from '../sinks/sink.ts';
import type { SinkCheckpoints } from '../state/interfaces.ts';
import { PageHandoff } from './page-handoff.ts';
import { run } from './run.ts';
import type { RunOptions } from './run-types.ts';
import type { RunSummary } from './summary.ts';

/** The committed pages of a run, for a program's `for await` (see `stream`). */
export interface PageStream<I> extends AsyncIterable<Page<I>> {
  /** The same, item by item: a page is acknowledged once the loop has pulled past its last item. */
  items(): AsyncIterable<I>;
  /** The run's summary, once it has ended (a failed run rejects with its failure); the loop is what runs it. */
  summary(): Promise<RunSummary>;
}

/** The stream's sink: its checkpoint, under this id in the state store, is the last page the program acknowledged. */
const STREAM_SINK_ID = 'stream:program';

/**
 * Runs a pipeline and yields each page as it commits, to a program's `for await` (docs/pipelines.md#composing-in-code):
 * `run()` with one more sink, the program. A page is acknowledged when the loop pulls the next one, and an acknowledged
 * page never comes again. Leaving the loop (`break`, `return`, a throw: JavaScript calls the iterator's `return()` the
 * same way for each) stops the run gracefully — it ends `interrupted`, resumable — and leaves the page the loop held
 * unacknowledged: the next `stream()` of the pipeline resumes the run and yields it first. So the program gets every
 * page at least once, and exactly once up to the page it left on; the pipeline's own sinks stay exactly once. The loop
 * is left once the run has ended. A slow loop slows the requests. The run starts at the first pull.
 */
export function stream<O>(pipeline: Pipeline<O>, options?: RunOptions): PageStream<O>;
export function stream<I, const S extends readonly AnyStage[] = readonly []>(definition: TypedDefinition<I, S>, options?: RunOptions): PageStream<ItemsAfter<I, S>>;
export function stream<I>(definition: PipelineDefinition | Pipeline, options: RunOptions = {}): PageStream<I> {
  if (definition instanceof URL) {
    throw new ValidationError('Invalid stream', [{ path: 'pipeline', message: 'stream() takes a pipeline definition, not a module URL: import the module and pass its pipeline' }]);
  }
  const handoff = new PageHandoff<Page<I>>();
  const leaving = new AbortController();
  let started: Promise<RunSummary> | undefined;
  // The run's end, for `summary()`: asking for it does not start the run (its pages would wait for a loop nobody runs).
  const ended = Promise.withResolvers<RunSummary>();
  ended.promise.catch(() => undefined);
  const start = (): Promise<RunSummary> => {
    if (started) return started;
    const signal = options.signal ? AbortSignal.any([options.signal, leaving.signal]) : leaving.signal;
    const pipeline = definePipeline({ ...(definition as PipelineDefinition), sinks: [...(definition.sinks as Sink<unknown>[]), programSink(handoff)] } as PipelineDefinition);
    started = run(pipeline, { ...options, signal });
    started.then(
      (summary) => {
        handoff.end();
        ended.resolve(summary);
      },
      (error: unknown) => {
        handoff.end(error);
        ended.reject(error);
      },
    );
    return started;
  };
  const summary = (): Promise<RunSummary> => ended.promise;
  const pages = (): AsyncIterator<Page<I>> => ({
    next() {
      void start().catch(() => undefined);
      return handoff.pull();
    },
    async return() {
      handoff.close();
      leaving.abort();
      // The loop goes on once the run has ended (its answers in flight committed, its lease let go), so that what
      // follows it — another stream() of the pipeline, the process's exit — finds the run settled. How it ended is the
      // summary's to say.
      await started?.catch(() => undefined);
      return { done: true, value: undefined };
    },
  });
  return {
    [Symbol.asyncIterator]: pages,
    summary,
    async *items() {
      for await (const page of { [Symbol.asyncIterator]: pages }) yield* page.items;
    },
  };
}

/**
 * The program as a sink: each committed page is offered to its loop, and checkpointed once the loop is done with it
 * (it pulled the next). A page the loop left unfinished is not checkpointed, so the next run yields it again.
 */
function programSink<I>(handoff: PageHandoff<Page<I>>): Sink<unknown> {
  let checkpoints: SinkCheckpoints | undefined;
  let held = 0;
  return {
    kind: 'stream',
    path: 'the program',
    writesFile: false,
    id: STREAM_SINK_ID,
    delivery: 'at_least_once',
    terms: { target: 'the program' },
    commits: {
      kind: 'deliver',
      async deliver(page, seq) {
        if (!(await handoff.offer(page as Page<I>))) return;
        await checkpoints?.set(STREAM_SINK_ID, { seq, bytes: null });
        held = seq;
      },
    },
    async open(ctx) {
      checkpoints = ctx.stateCheckpoints;
      // Seen for the first time: the program holds nothing of the past, and is owed nothing of it.
      held = (await checkpoints.get(STREAM_SINK_ID))?.seq ?? ctx.currentSeq;
      await checkpoints.set(STREAM_SINK_ID, { seq: held, bytes: null });
    },
    held: () => held,
    close() {
      // A run that ended with a page still offered (it failed elsewhere) lets it go.
      handoff.release();
    },
  };
}
