import { Worker } from 'node:worker_threads';
import { HeapLimitError } from '../errors/heap-limit-error.ts';
import { UsageError } from '../errors/usage-error.ts';
import { holdSqliteAddon } from './hold-addons.ts';

/**
 * A run's own thread, with a heap of its own size. Why: on the main thread V8 sizes the heap from the machine's memory
 * (a young generation that grows to 128 MB, an old generation allowed gigabytes, which it then fills lazily), and only
 * process flags bound it — which `node pipelines/x.ts` and a program calling `run` never pass. A thread's
 * `resourceLimits` bound the same heap from inside the program: about half the peak on the main thread, at the same
 * speed; a young generation of 8 MB rather than 16 lowers it again, at the same speed
 * (docs/benchmarks.md#figures-the-code-cites).
 */
const YOUNG_GENERATION_MB = 8;
const DEFAULT_HEAP_MB = 1024;
const HEAP_MB = { min: 128, max: 65_536 };

/** The old generation's ceiling: WEBDATA_HEAP_MB, for a pipeline whose own stages keep more than 1 GiB in memory. */
export function heapLimitMb(env: Readonly<Record<string, string | undefined>> = process.env): number {
  const text = env.WEBDATA_HEAP_MB;
  if (text === undefined || text === '') return DEFAULT_HEAP_MB;
  const mb = Number(text);
  if (!Number.isInteger(mb) || mb < HEAP_MB.min || mb > HEAP_MB.max) {
    throw new UsageError(`WEBDATA_HEAP_MB must be a whole number of megabytes from ${HEAP_MB.min} to ${HEAP_MB.max} (the run's heap; default ${DEFAULT_HEAP_MB}); got "${text}"`);
  }
  return mb;
}

/** The thread's entry module `name` beside `from` (a module URL): `.ts` in the sources, `.js` in the built package. */
export function entryBeside(from: string, name: string): URL {
  return new URL(`./${name}${from.endsWith('.ts') ? '.ts' : '.js'}`, from);
}

/**
 * Runs `entry` on a thread of its own with the run's heap limits (the same Node flags and environment as this one)
 * until it ends: its messages go to `onMessage`, `attach` wires it up (returning what undoes that). Resolves to its
 * exit code; rejects with what ended it otherwise (its heap limit in words that say what to do).
 */
export async function onBoundedThread<M>(
  entry: URL,
  workerData: unknown,
  options: { heapMb: number; onMessage(message: M): void; attach?(thread: Worker): () => void },
): Promise<number> {
  await holdSqliteAddon();
  const thread = new Worker(entry, { workerData, resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, maxOldGenerationSizeMb: options.heapMb } });
  const detach = options.attach?.(thread);
  thread.on('message', options.onMessage);
  try {
    return await new Promise<number>((resolve, reject) => {
      thread.once('error', reject);
      thread.once('exit', resolve);
    });
  } catch (error) {
    throw threadFailure(error, options.heapMb);
  } finally {
    detach?.();
  }
}

/** A thread that ended on its heap limit (`HeapLimitError`), in words that say what to do; any other failure as it came. */
export function threadFailure(error: unknown, heapMb: number): unknown {
  if ((error as { code?: string } | null)?.code !== 'ERR_WORKER_OUT_OF_MEMORY') return error;
  const message = `the run used up its heap (${heapMb} MB): a stage or sink keeps more than that in memory. What was committed is kept; set WEBDATA_HEAP_MB higher (megabytes) and run again to resume`;
  return new HeapLimitError(message);
}
