import { describeRefresh } from '../run/refresh-summary.ts';
import { describeDestination } from '../run/destination.ts';
import type { RunEvent } from '../run/run.ts';
import type { RunSummary } from '../run/summary.ts';
import { keyLines } from './key-lines.ts';
import { nextStep } from './next-step.ts';

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

/** How often a terminal's live line is redrawn: often enough to look live, seldom enough to cost nothing. */
const LIVE_INTERVAL_MS = 250;

/** Wraps text in an ANSI color when color is on; the identity when it is off (a pipe, a log file, NO_COLOR). */
type Paint = (code: number, text: string) => string;

/**
 * What a progress line shows, in the form JSON mode writes it and the human line is made from. A type, not an
 * interface: it goes into a JSON event's fields, and only a type alias counts as a Record<string, unknown>.
 */
type Numbers = {
  series: string;
  pages: number;
  items: number;
  duplicates: number;
  /** Items a stage removed that dedupe did not count (served − written − duplicates, page by page). */
  dropped: number;
  credits: string;
  requestsPerSecond: number;
  rateLimited: number;
  etaMs: number | undefined;
};

/**
 * The run's running totals, kept from its events: what the progress line and the JSON progress event report. Apart
 * from the writing so that the counting can be read (and changed) without the terminal's escape codes in the way.
 */
class Tally {
  readonly #now: () => number;
  #seriesTotal = 0;
  #seriesDone = 0;
  #pages = 0;
  #items = 0;
  #duplicates = 0;
  #dropped = 0;
  #credits = 0;
  #budget: number | null = null;
  #rateLimited = 0;
  #started: number;
  /** When each response of the last RATE_WINDOW_MS came: the request rate is a recent one, not the run's average. */
  readonly #recent: number[] = [];

  constructor(now: () => number) {
    this.#now = now;
    this.#started = now();
  }

  /** The run's start: its size and budget, and the credits a resumed run had already spent. The clock starts again. */
  start(event: Extract<RunEvent, { type: 'start' }>): void {
    this.#seriesTotal = event.series;
    this.#budget = event.budget;
    this.#credits = event.spentBefore;
    this.#started = this.#now();
  }

  page(event: Extract<RunEvent, { type: 'page' }>): void {
    this.#pages += 1;
    this.#items += event.items;
    this.#duplicates += event.duplicates;
    this.#dropped += Math.max(0, event.served - event.items - event.duplicates);
  }

  seriesDone(): void {
    this.#seriesDone += 1;
  }

  response(event: Extract<RunEvent, { type: 'response' }>): void {
    this.#recent.push(this.#now());
    this.#credits += event.credits;
    if (event.status === 429) this.#rateLimited += 1;
  }

  numbers(): Numbers {
    return {
      series: `${this.#seriesDone}/${this.#seriesTotal}`,
      pages: this.#pages,
      items: this.#items,
      duplicates: this.#duplicates,
      dropped: this.#dropped,
      credits: this.#budget === null ? `${this.#credits}` : `${this.#credits}/${this.#budget}`,
      requestsPerSecond: Math.round(this.#rate() * 10) / 10,
      rateLimited: this.#rateLimited,
      etaMs: this.#eta(),
    };
  }

  /** Responses a second over the last RATE_WINDOW_MS, or over the time since the start if that is shorter. */
  #rate(): number {
    const cutoff = this.#now() - RATE_WINDOW_MS;
    while (this.#recent.length > 0 && (this.#recent[0] as number) < cutoff) this.#recent.shift();
    const span = Math.min(RATE_WINDOW_MS, this.#now() - this.#started) / 1000;
    return span > 0 ? this.#recent.length / span : 0;
  }

  /** The time left at the pace of the series done so far; none before the first series ends or after the last. */
  #eta(): number | undefined {
    if (this.#seriesDone === 0 || this.#seriesDone >= this.#seriesTotal) return undefined;
    return ((this.#now() - this.#started) / this.#seriesDone) * (this.#seriesTotal - this.#seriesDone);
  }
}

/**
 * Progress and logs on stderr: a live line on a terminal, a plain line every few seconds otherwise, or JSON lines
 * for log collectors. stdout stays for data.
 */
export function progressReporter(options: ProgressOptions): ProgressReporter {
  return new ProgressReporter(options);
}

/**
 * What progressReporter returns. log, metricsEndpoint, onEvent and finish are arrow-function fields, not methods: the command line
 * hands `reporter.onEvent` to run() on its own, and a method would lose its `this` there.
 */
export class ProgressReporter {
  readonly #mode: ProgressMode;
  readonly #intervalMs: number;
  readonly #write: (text: string) => void;
  readonly #now: () => number;
  readonly #paint: Paint;
  readonly #tally: Tally;
  /** A live line is on the terminal: a log line clears it first and draws it again after. */
  #live = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ProgressOptions) {
    this.#mode = options.mode;
    this.#intervalMs = options.intervalMs ?? 10_000;
    this.#write = options.write ?? ((text: string) => process.stderr.write(text));
    this.#now = options.now ?? Date.now;
    const color = options.color ?? false;
    this.#paint = (code, text) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
    this.#tally = new Tally(this.#now);
  }

  /** A line for the reader: above the live line on a terminal, a `log` event in JSON mode, nothing when quiet. */
  readonly log = (text: string): void => {
    if (this.#mode === 'quiet') return;
    if (this.#mode === 'json') return this.#json('log', { message: text });
    if (this.#live) this.#write('\r\x1b[2K');
    this.#write(`${text}\n`);
    if (this.#live) this.#write(this.#line());
  };

  /** Where the run's /metrics is served: a line for the reader, a `metrics` event with the URL in JSON mode. */
  readonly metricsEndpoint = (url: string): void => {
    if (this.#mode === 'json') return this.#json('metrics', { url });
    this.log(`metrics: ${url}`);
  };

  readonly onEvent = (event: RunEvent): void => {
    switch (event.type) {
      case 'start':
        this.#start(event);
        break;
      case 'page':
        this.#tally.page(event);
        break;
      case 'series':
        this.#tally.seriesDone();
        if (this.#mode === 'json') this.#json('series', { series: event.series, reason: event.reason, pages: event.pages });
        break;
      case 'response':
        this.#tally.response(event);
        break;
      case 'stop':
        // Why the run stopped is said whatever the flags: a quiet worker that leaves (presumed dead by the others, a
        // 401 another worker saw) would otherwise exit with a code and nothing else to tell why.
        if (this.#mode === 'quiet') this.#write(`stop: ${event.message}\n`);
        else this.log(`${this.#paint(33, 'stop')}: ${event.message}`);
        break;
      case 'warning':
        this.log(`${this.#paint(33, 'warning')}: ${event.message}`);
        break;
      case 'pause':
        this.#pause(event);
        break;
      case 'notification':
        this.#notification(event);
        break;
      default:
        break;
    }
  };

  /** The end: the summary in a few human lines (or one JSON line). */
  readonly finish = (summary: RunSummary | undefined, error: unknown): void => {
    if (this.#timer) clearInterval(this.#timer);
    if (this.#live) this.#write('\r\x1b[2K');
    this.#live = false;
    if (this.#mode === 'quiet') return;
    if (this.#mode === 'json') {
      this.#json('finish', summary ? { summary } : { error: error instanceof Error ? error.message : String(error) });
      return;
    }
    if (!summary) return;
    for (const line of summaryLines(summary, this.#paint)) this.#write(line);
  };

  #start(event: Extract<RunEvent, { type: 'start' }>): void {
    this.#tally.start(event);
    if (this.#mode === 'json') this.#json('start', { ...event, type: undefined });
    else {
      this.log(startLine(event, this.#paint));
      for (const note of event.notes) this.log(note);
    }
    this.#startTimer();
  }

  /** The progress line from now on: redrawn on a terminal, written every intervalMs to a pipe or a log; never when quiet. */
  #startTimer(): void {
    if (this.#mode !== 'quiet' && this.#mode !== 'tty') this.#timer = setInterval(this.#tick, this.#intervalMs);
    if (this.#mode === 'tty') this.#timer = setInterval(this.#tick, LIVE_INTERVAL_MS);
    // The timer only reports: it must not keep the process alive after the run.
    this.#timer?.unref();
  }

  readonly #tick = (): void => {
    if (this.#mode === 'tty') {
      this.#live = true;
      this.#write(`\r\x1b[2K${this.#line()}`);
    } else if (this.#mode === 'plain') this.#write(`progress: ${this.#line()}\n`);
    else if (this.#mode === 'json') this.#json('progress', this.#tally.numbers());
  };

  /** A pause long enough to look like a hang is said, with why and until when; short ones are routine. */
  #pause(event: Extract<RunEvent, { type: 'pause' }>): void {
    if (event.ms <= VISIBLE_PAUSE_MS) return;
    if (this.#mode === 'json') this.#json('pause', { ms: event.ms, reason: event.reason, cause: event.cause, until: event.until });
    else this.log(`${this.#paint(33, 'pause')}: ${duration(event.ms)}, until ${event.until} (${event.cause})`);
  }

  /** A webhook's delivery: said as it goes; one that failed is said even when quiet (it is not the run's failure). */
  #notification(event: Extract<RunEvent, { type: 'notification' }>): void {
    if (this.#mode === 'json') return this.#json('notification', { ...event, type: undefined });
    const failed = event.status === 'failed' || event.status === 'aborted';
    const line = `${this.#paint(failed ? 31 : event.status === 'retrying' ? 33 : 32, 'webhook')} ${event.webhook}: ${notificationText(event)}`;
    if (!failed) return this.log(line);
    if (this.#mode !== 'quiet') return this.log(line);
    this.#write(`${line}\n`);
  }

  #line(): string {
    return progressLine(this.#tally.numbers(), this.#paint);
  }

  #json(event: string, fields: Record<string, unknown>): void {
    this.#write(`${JSON.stringify({ time: new Date(this.#now()).toISOString(), event, ...fields })}\n`);
  }
}

/** The human progress line: "3/10 series · 12 pages · 240 items (4 dup) · 12/100 credits · 1.5 req/s · ETA 2m05s". */
function progressLine(n: Numbers, paint: Paint): string {
  const parts = [
    `${n.series} series`,
    `${n.pages} pages`,
    `${n.items} items${itemNotes([n.duplicates ? `${n.duplicates} dup` : '', n.dropped ? `${n.dropped} dropped` : ''])}`,
    `${n.credits} credits`,
    `${n.requestsPerSecond} req/s`,
    ...(n.rateLimited ? [paint(33, `${n.rateLimited}×429`)] : []),
    ...(n.etaMs === undefined ? [] : [`ETA ${duration(n.etaMs)}`]),
  ];
  return parts.join(' · ');
}

/** " (4 dup, 25 dropped)": the notes that apply, or nothing. */
function itemNotes(notes: readonly string[]): string {
  const said = notes.filter(Boolean);
  return said.length ? ` (${said.join(', ')})` : '';
}

/** The run's first line. The destination first: a pipeline file can name any address, and this is where the key goes. */
function startLine(event: Extract<RunEvent, { type: 'start' }>, paint: Paint): string {
  return (
    `${paint(1, event.pipeline)}: ${describeDestination(event.destination)}; ${describeStart(event)}, ` +
    `${event.series} series × up to ${event.maxPages} pages` +
    (event.replayed ? `; ${event.replayed} committed page(s) re-delivered to sinks that lacked them` : '')
  );
}

/** The human summary, one string per line (each ending in a newline), written one by one as before. */
function summaryLines(summary: RunSummary, paint: Paint): string[] {
  const lines: string[] = [];
  const status = summary.status === 'completed' || summary.status === 'budget' || summary.status === 'allowance' ? paint(32, summary.status) : paint(31, summary.status);
  lines.push(
    `${summary.pipeline}: ${status}${summary.reason ? ` (${summary.reason})` : ''} in ${duration(summary.durationMs)} — ` +
      `${summary.pages.fetched} pages, ${summary.items.written} rows (${summary.items.duplicates} duplicates${summary.items.dropped ? `, ${summary.items.dropped} dropped by stages` : ''}), ` +
      `${summary.credits.spent} credits${summary.credits.budget === null ? '' : ` of ${summary.credits.budget}`}` +
      `${creditNotes(summary.credits)}, ${summary.requests.total} requests, ${summary.retries} retries\n`,
  );
  const stopped = Object.entries(summary.series.stopped).map(([reason, n]) => `${n} ${reason}`);
  const skipped = summary.series.skipped === undefined ? '' : `, ${summary.series.skipped} skipped by the refresh plan`;
  lines.push(`series: ${summary.series.completed} completed, ${summary.series.failed} failed${stopped.length ? `, stopped: ${stopped.join(', ')}` : ''}${skipped}\n`);
  // What the plan chose and why (docs/pipelines.md#the-refresh-planner).
  if (summary.refresh) lines.push(`refresh plan: ${describeRefresh(summary.refresh)}\n`);
  const atLeastOnce = summary.outputs.filter((output) => output.delivery === 'at_least_once').map((output) => output.path);
  if (atLeastOnce.length > 0) lines.push(`at least once (a page may repeat after a crash): ${atLeastOnce.join(', ')}\n`);
  lines.push(...keyLines(summary.keys, paint));
  if (summary.worker) lines.push(`this worker (${summary.worker.id}): ${summary.worker.pages} pages, ${summary.worker.credits} credits\n`);
  if (summary.message) lines.push(`${summary.message}\n`);
  const next = nextStep(summary);
  if (next) lines.push(`${next}\n`);
  return lines;
}

/** "delivered (completed)", "HTTP 500 (attempt 1); next attempt in 2s", "not delivered after 5 attempts: …". */
function notificationText(event: Extract<RunEvent, { type: 'notification' }>): string {
  const attempts = `${event.attempts} attempt${event.attempts === 1 ? '' : 's'}`;
  switch (event.status) {
    case 'delivered':
      return `delivered (${event.event}, ${attempts})`;
    case 'retrying':
      return `${event.error ?? 'failed'} (attempt ${event.attempts}); next attempt in ${duration(event.waitMs ?? 0)}`;
    case 'aborted':
      return `aborted after ${attempts} (${event.error ?? 'aborted'}): still pending, sent again by the pipeline's next run`;
    default:
      return `not delivered after ${attempts} (${event.error ?? 'failed'}): recorded, shown by webdata-etl runs`;
  }
}

/** `45s`, `12m05s`, `3h20m`. */
export function duration(ms: number): string {
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
