import type { Series } from '../pipeline/page.ts';
import type { SchedulerOptions } from '../schedule/options.ts';
import type { Scheduler } from '../schedule/scheduler.ts';
import type { SeriesEnd, SeriesFeed } from '../sources/source.ts';
import type { StateStore } from '../state/interfaces.ts';

/** One process's part of a run shared by many, printed beside the run's summary. */
export interface WorkerShare {
  id: string;
  host: string;
  pid: number;
  pages: number;
  credits: number;
}

/** A distributed run as a whole, as its metrics show it (the same from every worker). */
export interface FleetFigures {
  workers: number;
  series: { ended: number; active: number; waiting: number };
}

/**
 * What a run needs from where it runs (docs/design.md#the-run-host): its series feed, its limits, what comes before a
 * page permit, the commit fence, joining and leaving. The runner asks these and never which host it has: this
 * process alone (`localHost`), or a worker of a distributed run (`distributed/postgres-host.ts`).
 */
export interface RunHost {
  /** The state store as this host's pages commit to it: behind its commit fence. */
  readonly store: StateStore;
  /** Pages committing at once, in order. */
  readonly commitWindow: number;
  /** Whether a page's dedupe keys are claimed, in its statement, against other processes that page the same run. */
  readonly claimsKeys: boolean;
  /** Whether another process may have paged a series in this very invocation: its progress is read even in a new run. */
  readonly sharesSeries: boolean;
  /** The scheduler's limits when they are shared beyond this process; empty: its own pacer and credit meter. */
  readonly limits: Pick<SchedulerOptions, 'pacer' | 'meter' | 'learns' | 'fleet'>;
  /** This process as one of the run's workers, for the `start` event: its id, and whether it joined others at work. */
  readonly member: { id: string; joined: boolean } | undefined;
  /** The series this process is to page, out of a source's own (`all`); absent, a source pages all of them. */
  readonly feed?: (all: Iterator<Series>, again?: () => Iterator<Series>) => SeriesFeed;
  /** Before each page permit is given. */
  beforePage(): Promise<void>;
  /** Whether the series is no longer this process's to page (its hold on it lapsed). */
  lapsed(seriesId: string): boolean;
  /** A series that was over before this process took it. */
  seriesOver(seriesId: string): Promise<void>;
  /** A series' end is recorded (or, `lost`, is another's to record). */
  seriesEnded(seriesId: string, reason: SeriesEnd['reason']): Promise<void>;
  /** A series whose end was refused by the commit fence (`SeriesLostError`): another process has it, and its end stands. */
  seriesLost(seriesId: string): Promise<void>;
  /** Hears the run's scheduler: stops that are the run's, and this process's share. */
  watch(scheduler: Scheduler): void;
  /** Whether other processes are still at work on the run: the run's record is then theirs to write. */
  othersAtWork(): Promise<boolean>;
  /** A run shared by many: its workers at work and its series by state, for the run's metrics (absent: this process alone). */
  readonly fleet?: () => Promise<FleetFigures>;
  /**
   * A run shared by many: claims each label for the key this process holds under it (by fingerprint), and answers the
   * labels the run already has another key under. Absent: this process alone, whose labels are its own.
   */
  claimKeys?(fingerprints: ReadonlyMap<string, string>): Promise<string[]>;
  /** This process's share of a run shared by many. */
  share(): WorkerShare | undefined;
  /** Lets go of the run, however it ended: `status` is how this process left it (its summary's status, or `failed`). */
  leave(status: string): Promise<void>;
}
