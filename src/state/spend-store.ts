/** One request's spend: a row of the spend ledger. */
export interface SpendRow {
  runId: string;
  at: string;
  seriesId: string;
  path: string;
  attempt: number;
  status: string;
  credits: number;
  uncertain: boolean;
  latencyMs: number;
  /** A 2xx whose page was never committed (its invocation failed, or another worker took its series): paid all the same. */
  uncommitted?: boolean;
}

/** Totals of a run's spend ledger. */
export interface SpendTotals {
  spent: number;
  uncertain: number;
  /** Credits of answers whose pages were never committed (fetched again when the run resumes). */
  uncommitted: number;
  requests: number;
  retries: number;
  byStatus: Record<string, number>;
  byEndpoint: Record<string, number>;
}

/**
 * The state store's spend ledger (docs/design.md#spend-however-a-run-ends): a page's own answer commits with the page
 * (`PageCommit.spend`); the others are written here.
 */
export interface SpendStore {
  /** Spend rows written on their own (answers with no page: failures, and those whose page never committed). */
  spend(rows: readonly SpendRow[]): Promise<void>;
  spendOf(runId: string): Promise<SpendTotals>;
}
