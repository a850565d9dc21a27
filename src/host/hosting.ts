import type { SourcePlan } from '../sources/source.ts';
import type { Lease } from '../state/interfaces.ts';
import type { RunHost } from './run-host.ts';

/** The run a host is made for, as its opening decided it. */
export interface HostedRun {
  pipeline: string;
  runId: string;
  plan: SourcePlan;
  /** Whether this process joins workers at work on the run; else it decided what the run is (and plans it). */
  joining: boolean;
  /** Which invocation of the run this is (1: a new run): the workers of one planning share it. */
  invocation: number;
  budget: number | null;
  retryFailed: boolean;
  /** Credits per request by endpoint path. */
  weights: Readonly<Record<string, number>>;
  /** Spend of the run before this invocation (a run that predates its shared budget row starts from it). */
  spentBefore: number;
  /** The run's dedupe looks across series: a page's keys are claimed against the other processes paging the run. */
  claimsKeys: boolean;
}

/**
 * Where a run runs, before it has its host (docs/design.md#the-run-host): this process alone (`localHosting`), or a
 * worker of a distributed run (`distributed/join.ts`). Chosen once, where the run opens (`run/open-run.ts`); the
 * opening then asks this, and the rest of the run asks the host it makes.
 */
export interface Hosting {
  /** Whether the run's workers write its outputs together: a sink then takes no lease of one process's own on them. */
  readonly shared: boolean;
  /**
   * Holds the pipeline while this process decides what its run is, and decides under it: the pipeline's lease, or a
   * distributed run's planning lock. Resolves to the lock, held, and what was decided; a failure lets go of the lock.
   */
  hold<T extends { joining: boolean }>(pipeline: string, decide: () => Promise<T>): Promise<{ lock: Lease; decided: T }>;
  /** Whether workers are at work on the run, whom this process then joins (never, for a process alone). */
  atWork(runId: string): Promise<boolean>;
  /** Makes this process the run's host, which takes over `lock` (and lets go of it when it leaves, or once it joined). */
  host(run: HostedRun, lock: Lease): Promise<RunHost>;
}
