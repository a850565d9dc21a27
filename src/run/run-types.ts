import type { Client } from '../client/client.ts';
import type { AllowanceInput } from '../schedule/allowance.ts';
import type { Clock } from '../schedule/clock.ts';
import type { SchedulerEvent } from '../schedule/scheduler.ts';
import type { Destination, DestinationInput } from './destination.ts';
import type { LifecycleOptions } from './lifecycle.ts';
import type { TelemetryOptions } from './telemetry-options.ts';

export interface RunOptions extends LifecycleOptions {
  /** Overrides WEBDATA_BASE_URL and the pipeline's `api.baseUrl`. */
  baseUrl?: string | undefined;
  /** Overrides WEBDATA_API_KEY (programmatic use; pipeline files never carry a key). */
  apiKey?: string | undefined;
  token?: string | undefined;
  /** Where WEBDATA_* variables are read; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Stops the run gracefully: nothing new is sent, answers in flight are committed, the run can be resumed. */
  signal?: AbortSignal | undefined;
  /** Aborts the run: requests in flight are cancelled (what was committed stays). */
  abortSignal?: AbortSignal | undefined;
  /** Progress: scheduler events, and one event per page committed and per series ended. */
  onEvent?: ((event: RunEvent) => void) | undefined;
  clock?: Clock | undefined;
  /** A client to use instead of one built from the options (its owner closes it). */
  client?: Client | undefined;
  /** Who set `baseUrl` and `apiKey`/`token` (e.g. `--base-url`), for the destination shown before the first request. */
  sources?: DestinationInput['sources'];
  /**
   * A PostgreSQL database for the run state, overriding the pipeline's `state` (the command line's `--state`, or
   * WEBDATA_STATE_URL). Unlike a URL in a file it may carry a password, as DATABASE_URL may.
   */
  stateUrl?: string | undefined;
  /** The file the pipeline came from, named as the address's source when the pipeline decides it. */
  pipelineFile?: string | undefined;
  /** What the run's OpenTelemetry spans may carry beyond their numbers: `{ queryText: true }` (docs/observability.md#spans). */
  telemetry?: TelemetryOptions | undefined;
  /**
   * The allowance of the keys the run sends with, in place of the pipeline's `allowance` (a key's own,
   * `keys.<label>.allowance`, still stands): docs/credits.md#allowances.
   */
  allowance?: AllowanceInput | undefined;
}

export type RunEvent =
  | SchedulerEvent
  | {
      type: 'start';
      runId: string;
      pipeline: string;
      series: number;
      maxPages: number;
      budget: number | null;
      spentBefore: number;
      resumed: boolean;
      replayed: number;
      notes: readonly string[];
      /** Where the key goes: the origin, who chose it, and what credentials. */
      destination: Destination;
      /** A distributed run: this process's worker id, and whether it joined workers already at work. */
      worker?: { id: string; joined: boolean };
    }
  | { type: 'warning'; message: string }
  /** A series this invocation pages (not one an earlier invocation ended), before its first request; `resumed`: from where one left it. */
  | { type: 'series_start'; series: string; endpoint: string; query: string; country: string; lang: string; resumed: boolean }
  | {
      type: 'page';
      key: string;
      series: string;
      number: number;
      items: number;
      served: number;
      duplicates: number;
      /** From the page leaving the stages to its commit being durable, in milliseconds. */
      commitMs: number;
    }
  | { type: 'series'; series: string; reason: string; pages: number }
  | {
      /** A webhook told of the run's end (docs/notifications.md): delivered, failed for good, retrying, or aborted (left pending). */
      type: 'notification';
      runId: string;
      /** The webhook's origin and path (never its query string). */
      webhook: string;
      /** The end it tells of: completed, budget, failed, stopped, interrupted. */
      event: string;
      status: 'delivered' | 'failed' | 'retrying' | 'aborted';
      /** Attempts made so far. */
      attempts: number;
      error?: string;
      /** Retrying: the wait before the next attempt. */
      waitMs?: number;
    };
