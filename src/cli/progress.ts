import { describeDestination } from '../run/destination.ts';
import type { RunEvent } from '../run/run.ts';
import type { RunSummary } from '../run/summary.ts';

export type ProgressMode = 'tty' | 'plain' | 'json' | 'quiet';

export interface ProgressOptions {
  mode: ProgressMode;
  color?: boolean;
  write?: (text: string) => void;
  /** Plain and JSON modes: a progress line this often. */
  intervalMs?: number;
  now?: () => number;
}

const RATE_WINDOW_MS = 5000;

/** Pauses longer than this are shown. */
const VISIBLE_PAUSE_MS = 2000;

/**
 * Progress and logs on stderr: a live line on a terminal, a plain line every few seconds otherwise, or JSON lines
 * for log collectors. stdout stays for data.
 */
export function progressReporter(options: ProgressOptions) {
  const write = options.write ?? ((text: string) => process.stderr.write(text));
  const now = options.now ?? Date.now;
  const color = options.color ?? false;
  const paint = (code: number, text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const state = {
    pipeline: '',
    runId: '',
    seriesTotal: 0,
    seriesDone: 0,
    pages: 0,
    items: 0,
    duplicates: 0,
    credits: 0,
    budget: null as number | null,
    rateLimited: 0,
    started: now(),
  };
  const recent: number[] = [];
  let live = false;
  let timer: NodeJS.Timeout | undefined;

  const rate = () => {
    const cutoff = now() - RATE_WINDOW_MS;
    while (recent.length > 0 && (recent[0] as number) < cutoff) recent.shift();
    const span = Math.min(RATE_WINDOW_MS, now() - state.started) / 1000;
    return span > 0 ? recent.length / span : 0;
  };
  const eta = () => {
    if (state.seriesDone === 0 || state.seriesDone >= state.seriesTotal) return undefined;
    return ((now() - state.started) / state.seriesDone) * (state.seriesTotal - state.seriesDone);
  };
  const numbers = () => ({
    series: `${state.seriesDone}/${state.seriesTotal}`,
    pages: state.pages,
    items: state.items,
    duplicates: state.duplicates,
    credits: state.budget === null ? `${state.credits}` : `${state.credits}/${state.budget}`,
    requestsPerSecond: Math.round(rate() * 10) / 10,
    rateLimited: state.rateLimited,
    etaMs: eta(),
  });
  const line = () => {
    const n = numbers();
    const parts = [
      `${n.series} series`,
      `${n.pages} pages`,
      `${n.items} items${n.duplicates ? ` (${n.duplicates} dup)` : ''}`,
      `${n.credits} credits`,
      `${n.requestsPerSecond} req/s`,
      ...(n.rateLimited ? [paint(33, `${n.rateLimited}×429`)] : []),
      ...(n.etaMs === undefined ? [] : [`ETA ${duration(n.etaMs)}`]),
    ];
    return parts.join(' · ');
  };
  const json = (event: string, fields: Record<string, unknown>) => write(`${JSON.stringify({ time: new Date(now()).toISOString(), event, ...fields })}\n`);
  const log = (text: string) => {
    if (options.mode === 'quiet') return;
    if (options.mode === 'json') return json('log', { message: text });
    if (live) write('\r\x1b[2K');
    write(`${text}\n`);
    if (live) write(line());
  };

  const tick = () => {
    if (options.mode === 'tty') {
      live = true;
      write(`\r\x1b[2K${line()}`);
    } else if (options.mode === 'plain') write(`progress: ${line()}\n`);
    else if (options.mode === 'json') json('progress', numbers());
  };

  return {
    log,
    onEvent(event: RunEvent): void {
      switch (event.type) {
        case 'start':
          Object.assign(state, { pipeline: event.pipeline, runId: event.runId, seriesTotal: event.series, budget: event.budget, credits: event.spentBefore, started: now() });
          if (options.mode === 'json') json('start', { ...event, type: undefined });
          else {
            // The destination first: a pipeline file can name any address, and this is where the key goes.
            log(
              `${paint(1, event.pipeline)}: ${describeDestination(event.destination)}; ${describeStart(event)}, ` +
                `${event.series} series × up to ${event.maxPages} pages` +
                (event.replayed ? `; ${event.replayed} committed page(s) re-delivered to sinks that lacked them` : ''),
            );
            for (const note of event.notes) log(note);
          }
          if (options.mode !== 'quiet' && options.mode !== 'tty') timer = setInterval(tick, options.intervalMs ?? 10_000);
          if (options.mode === 'tty') timer = setInterval(tick, 250);
          timer?.unref();
          break;
        case 'page':
          state.pages += 1;
          state.items += event.items;
          state.duplicates += event.duplicates;
          break;
        case 'series':
          state.seriesDone += 1;
          if (options.mode === 'json') json('series', { series: event.series, reason: event.reason, pages: event.pages });
          break;
        case 'response':
          recent.push(now());
          state.credits += event.credits;
          if (event.status === 429) state.rateLimited += 1;
          break;
        case 'stop':
          log(`${paint(33, 'stop')}: ${event.message}`);
          break;
        case 'warning':
          log(`${paint(33, 'warning')}: ${event.message}`);
          break;
        case 'pause':
          // A pause long enough to look like a hang is said, with why and until when; short ones are routine.
          if (event.ms > VISIBLE_PAUSE_MS) {
            if (options.mode === 'json') json('pause', { ms: event.ms, reason: event.reason, cause: event.cause, until: event.until });
            else log(`${paint(33, 'pause')}: ${duration(event.ms)}, until ${event.until} (${event.cause})`);
          }
          break;
        default:
          break;
      }
    },
    /** The end: the summary in a few human lines (or one JSON line). */
    finish(summary: RunSummary | undefined, error: unknown): void {
      if (timer) clearInterval(timer);
      if (live) write('\r\x1b[2K');
      live = false;
      if (options.mode === 'quiet') return;
      if (options.mode === 'json') {
        json('finish', summary ? { summary } : { error: error instanceof Error ? error.message : String(error) });
        return;
      }
      if (!summary) return;
      const status = summary.status === 'completed' || summary.status === 'budget' ? paint(32, summary.status) : paint(31, summary.status);
      write(
        `${summary.pipeline}: ${status}${summary.reason ? ` (${summary.reason})` : ''} in ${duration(summary.durationMs)} — ` +
          `${summary.pages.fetched} pages, ${summary.items.written} rows (${summary.items.duplicates} duplicates), ` +
          `${summary.credits.spent} credits${summary.credits.budget === null ? '' : ` of ${summary.credits.budget}`}` +
          `${creditNotes(summary.credits)}, ${summary.requests.total} requests, ${summary.retries} retries\n`,
      );
      const stopped = Object.entries(summary.series.stopped).map(([reason, n]) => `${n} ${reason}`);
      write(
        `series: ${summary.series.completed} completed, ${summary.series.failed} failed${stopped.length ? `, stopped: ${stopped.join(', ')}` : ''}\n`,
      );
      const atLeastOnce = summary.outputs.filter((output) => output.delivery === 'at_least_once').map((output) => output.path);
      if (atLeastOnce.length > 0) write(`at least once (a page may repeat after a crash): ${atLeastOnce.join(', ')}\n`);
      if (summary.worker) write(`this worker (${summary.worker.id}): ${summary.worker.pages} pages, ${summary.worker.credits} credits\n`);
      if (summary.message) write(`${summary.message}\n`);
      if (summary.resumeAt) write(`resume after ${summary.resumeAt} with the same command\n`);
      else if (summary.status === 'interrupted' || summary.status === 'stopped') write('run the same command again to resume (or join the workers still at it)\n');
    },
  };
}

export type ProgressReporter = ReturnType<typeof progressReporter>;

function duration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}

/** "run X", "resuming run X", or a worker's "joined run X as worker W". */
function describeStart(event: Extract<RunEvent, { type: 'start' }>): string {
  if (event.worker?.joined) return `joined run ${event.runId} as worker ${event.worker.id}`;
  const run = event.resumed ? `resuming run ${event.runId}` : `run ${event.runId}`;
  return event.worker ? `${run} as worker ${event.worker.id} (others may join)` : run;
}

/** " (2 uncertain, 3 for pages never committed)": the parts of the spend a reader should know apart. */
function creditNotes(credits: RunSummary['credits']): string {
  const notes = [credits.uncertain ? `${credits.uncertain} uncertain` : '', credits.uncommitted ? `${credits.uncommitted} for pages never committed` : ''].filter(Boolean);
  return notes.length > 0 ? ` (${notes.join(', ')})` : '';
}
