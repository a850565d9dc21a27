// The thread of run(url) (run-module.ts starts it): loads the pipeline, runs it, posts events and the outcome back.
import { fileURLToPath } from 'node:url';
import { loadPipeline } from '../config/load-pipeline.ts';
import { postedError } from '../threads/posted-error.ts';
import { onParentMessages, runThreadData, toParent } from '../threads/run-thread.ts';
import type { ModuleRunReport } from './run-module.ts';
import { run } from './run.ts';
import type { RunEvent, RunOptions } from './run-types.ts';

const { url, options, events } = runThreadData<{ url: string; options: RunOptions; events: boolean }>();
const report = (message: ModuleRunReport) => toParent(message);
const stop = new AbortController();
const abort = new AbortController();
onParentMessages((message) => (message.type === 'stop' ? stop.abort() : abort.abort()));

// An event a structured clone refuses (a function in a user's warning?) goes as its JSON.
const onEvent = (event: RunEvent) => {
  try {
    report({ type: 'event', event });
  } catch {
    report({ type: 'event', event: JSON.parse(JSON.stringify(event)) as RunEvent });
  }
};

try {
  const pipeline = await loadPipeline(fileURLToPath(url));
  // Events cross only to a caller who follows them: each is a message the parent's heap receives.
  report({ type: 'done', summary: await run(pipeline, { ...options, signal: stop.signal, abortSignal: abort.signal, ...(events ? { onEvent } : {}) }) });
} catch (error) {
  report({ type: 'failed', error: postedError(error) });
}
