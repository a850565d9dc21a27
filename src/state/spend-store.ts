/** The key a request went with, as the ledger knows it (never the key itself). */
export interface SpendKey {
  /** Its fingerprint under the store's secret (client/api-keys.ts); null: none to take (a token, a client given to run()). */
  fingerprint: string | null;
  label: string;
  /** The allowance's period its credits were held in (`2026-11-27`, `2026-11`); null: the key has no allowance. */
  period: string | null;
  /**
   * The hold they were held under (allowance-store.ts): the row's write moves them from that hold to the ledger, in one
   * transaction, so that they are counted once, held or spent, at every moment. Null: no allowance.
   */
  holder: string | null;
}

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
  /** The pipeline that spent it (rows written before state schema 7 have none). */
  pipeline?: string | undefined;
  /** The key it went with (rows written before state schema 7 have none). */
  key?: SpendKey | undefined;
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
