import type { AllowanceOut } from './allowance-meter.ts';
import type { Outcome, SchedulerEvent, StopInfo } from './types.ts';

/**
 * Whether a request may still be sent: the run's stop (once there is one, nothing new is sent) and the endpoints a
 * 403 stopped (the others go on). `signal` aborts when the run stops, to wake whatever waits: the pacer, pauses,
 * retry sleeps, reservations waiting to settle.
 */
export interface Stops {
  readonly signal: AbortSignal;
  /** The run-wide stop, once there is one. */
  readonly run: StopInfo | undefined;
  /** Endpoints stopped by a 403, with the error. */
  readonly forbidden: Map<string, unknown>;
  /** Stops the run (the first stop stands). */
  stopRun(info: StopInfo): void;
  /** Stops every request to `path` (the first 403 stands). */
  forbid(path: string, error: unknown, message: string): void;
  /** The stopped outcome of a request to `path` after `attempts`, when it may no longer be sent. */
  outcome(path: string, attempts: number): Outcome<never> | undefined;
}

/** `onStop` runs once the run has stopped, after `signal` has aborted. */
export function createStops(emit: (event: SchedulerEvent) => void, onStop: () => void): Stops {
  const halt = new AbortController();
  const forbidden = new Map<string, unknown>();
  let run: StopInfo | undefined;

  return {
    signal: halt.signal,
    get run() {
      return run;
    },
    forbidden,
    stopRun(info) {
      if (run) return;
      run = info;
      emit({ type: 'stop', reason: info.reason, message: info.message });
      halt.abort();
      onStop();
    },
    forbid(path, error, message) {
      if (forbidden.has(path)) return;
      forbidden.set(path, error);
      emit({ type: 'stop', reason: 'forbidden', path, message });
    },
    outcome(path, attempts) {
      if (run) return { ok: false, kind: 'stopped', reason: run.reason, error: run.error, resumeAt: run.resumeAt, attempts };
      if (forbidden.has(path)) return { ok: false, kind: 'stopped', reason: 'forbidden', error: forbidden.get(path), attempts };
      return undefined;
    },
  };
}

/**
 * The run's stop when every key it could send with is out of its allowance (docs/credits.md#allowances): each key's
 * words, and when the first opens again (the run resumes from there: none when no key opens again in this run).
 */
export function allowanceStop(out: readonly AllowanceOut[]): StopInfo {
  const opens = Math.min(...out.map((each) => each.until));
  const message = out.length === 1 ? (out[0] as AllowanceOut).message : `every key's allowance is spent: ${out.map((each) => each.message).join('; ')}`;
  return { reason: 'allowance', message, ...(Number.isFinite(opens) ? { resumeAt: new Date(opens) } : {}), allowance: out };
}
