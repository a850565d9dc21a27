import type { Allowance } from '../schedule/allowance.ts';
import type { Period } from '../schedule/allowance-period.ts';

/** What binds a key: its credits, period and zone (how a pipeline spreads its share is the pipeline's own). */
export type KeyAllowance = Pick<Allowance, 'credits' | 'per' | 'timezone'>;

/** An allowance as the state store records it, by the key's fingerprint: who declared it last, under what label. */
export interface RecordedAllowance extends KeyAllowance {
  pipeline: string;
  /** The label that pipeline gives the key (another pipeline may label it otherwise). */
  label: string;
  /** ISO 8601. */
  declaredAt: string;
}

/** A pipeline's word on a key's allowance as a run opens: its own (`allowance`), or none. */
export interface AllowanceDeclaration {
  fingerprint: string;
  label: string;
  pipeline: string;
  allowance: KeyAllowance | null;
}

/**
 * How a declaration went: the allowance that binds the key now (null: none), or the one another pipeline recorded,
 * which the declaration differs from (nothing changed).
 */
export type DeclaredAllowance = { bound: RecordedAllowance | null } | { conflict: RecordedAllowance };

/** A process asks to hold up to `want` more credits of a key's allowance, for the period the store's clock is in. */
export interface HoldRequest {
  fingerprint: string;
  /** This process's run (a random id of its invocation): its holds are its own, and given back with it. */
  holder: string;
  pipeline: string;
  runId: string;
  want: number;
  /** How long the hold stands unless renewed: a holder that died stops renewing, and its hold goes back. */
  ttlMs: number;
}

/** What a hold decided, under the store's lock. */
export interface AllowanceHold {
  /** Credits added to the holder's hold: `want`, or what was left (0: nothing). */
  granted: number;
  /** The allowance as recorded when it decided. */
  allowance: RecordedAllowance;
  /** The period the store's clock is in. */
  period: Period;
  /** Credits the ledger holds for the key in the period (every pipeline's), and those every holder holds of it now. */
  spent: number;
  held: number;
  /**
   * What this holder holds in the period now, the grant included (spent and not yet in the ledger, too): less than it
   * thinks it holds when its hold expired and went back meanwhile (a process suspended for longer than a hold stands).
   */
  mine: number;
  /** The store's clock when it decided (ms since the epoch). */
  storeTime: number;
}

/** What a key's period has taken, read without holding anything: a run's share of it (docs/credits.md#spreading-an-allowance). */
export interface AllowanceUsage {
  /** Credits the ledger holds for the key in the period, every pipeline's. */
  spent: number;
  /** Credits holders hold of it now (holds expired not counted). */
  held: number;
  /** Of `spent`, what one run spent since an instant (the occurrence it is in). */
  runSpent: number;
}

/**
 * Keys' allowances in the state store (docs/credits.md#allowances): declared by pipelines, recorded by the key's
 * fingerprint, and spent through holds. A hold is credits a process may send requests with; it decides under a lock
 * (SQLite's write lock, a row lock in PostgreSQL), never by a read and then a write: spent in the period (the ledger)
 * and held by every process, plus what it grants, never pass the allowance. A spend row moves its credits from its
 * hold to the ledger in the row's own transaction (`SpendRow.key.holder`), so that they count once at every moment.
 */
export interface AllowanceStore {
  /**
   * Records a pipeline's allowance for a key, or says what binds it when the pipeline declares none. Another pipeline's
   * recorded allowance that differs is a conflict (nothing changes); the pipeline that recorded it may change it.
   */
  declareAllowance(declaration: AllowanceDeclaration): Promise<DeclaredAllowance>;
  /** Holds up to `want` more credits of the key's allowance; undefined when the key has none recorded. */
  holdAllowance(request: HoldRequest): Promise<AllowanceHold | undefined>;
  /** Gives back `credits` of a holder's hold in a period (unused: the period ended, or the run did). */
  giveBackAllowance(fingerprint: string, period: string, holder: string, credits: number): Promise<void>;
  /** Keeps a holder's holds standing for `ttlMs` more. */
  renewAllowanceHolds(holder: string, ttlMs: number): Promise<void>;
  /** A holder's holds go (its run ended, its spend written). */
  releaseAllowanceHolds(holder: string): Promise<void>;
  /**
   * What the key's `period` has taken, and what run `runId` spent of it since `since` (ISO 8601, by the spend rows'
   * `at`): read, nothing held. A share is taken of it before a run sends anything.
   */
  allowanceUsage(query: { fingerprint: string; period: string; runId: string; since: string }): Promise<AllowanceUsage>;
}
