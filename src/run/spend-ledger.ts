import type { SpendRow, SpendStore } from '../state/spend-store.ts';

/**
 * What a run's requests cost, on its way to the state store's `spend` ledger (docs/guarantees.md, "Spend, however a
 * run ends"). A 2xx that brings a page waits for that page: a series has one request out at a time, so its answers
 * come in the order of its pages, and each page's commit takes its own (`take`): the answers for it and any before it,
 * not the next page's, which may be answered while this one is still on its way to its commit (its spend is that page's
 * to commit, or to write `uncommitted` if it never does). Any other answer is written at once.
 * Answers whose pages did not commit — their transaction failed, their series was lost, the run failed before they
 * reached it — are written by `flush`, marked `uncommitted`, however the run ends.
 */
export class SpendLedger {
  readonly #store: SpendStore;
  /** 2xx answers waiting for their pages, by series, in the order they came, with the page each asked for where told. */
  readonly #waiting = new Map<string, { row: SpendRow; page: number | undefined }[]>();
  readonly #uncommitted: SpendRow[] = [];
  /** Rows written on their own, not yet known to be written: the run waits for them before it closes. */
  readonly #writing = new Set<Promise<void>>();

  constructor(store: SpendStore) {
    this.#store = store;
  }

  /** A request's spend: written at once, or, for a 2xx that brings a page, with that page's transaction. */
  async record(row: SpendRow, page?: number): Promise<void> {
    if (/^2\d\d$/.test(row.status) && !row.uncertain) {
      const rows = this.#waiting.get(row.seriesId);
      if (rows) rows.push({ row, page });
      else this.#waiting.set(row.seriesId, [{ row, page }]);
      return;
    }
    const write = this.#store.spend([row]);
    this.#writing.add(write);
    try {
      await write;
    } finally {
      this.#writing.delete(write);
    }
  }

  /** The answers page `page` of `seriesId` brings into its commit: those for it or before it (or not told which). */
  take(seriesId: string, page: number): SpendRow[] {
    const waiting = this.#waiting.get(seriesId) ?? [];
    const later = waiting.filter((entry) => entry.page !== undefined && entry.page > page);
    if (later.length > 0) this.#waiting.set(seriesId, later);
    else this.#waiting.delete(seriesId);
    return waiting.filter((entry) => entry.page === undefined || entry.page <= page).map((entry) => entry.row);
  }

  /** Answers paid for whose page did not commit: `flush` writes them. */
  paidNotCommitted(rows: readonly SpendRow[]): void {
    this.#uncommitted.push(...paidNotCommitted(rows));
  }

  /**
   * Waits for rows on their way; writes those of answers whose pages never committed, marked so (still paid, still
   * recorded). The run calls it however it ends, a failure included, so that the next invocation's budget starts from
   * what the server charged.
   */
  async flush(): Promise<void> {
    await Promise.all(this.#writing);
    for (const entries of this.#waiting.values()) this.paidNotCommitted(entries.map((entry) => entry.row));
    this.#waiting.clear();
    if (this.#uncommitted.length > 0) await this.#store.spend(this.#uncommitted.splice(0));
  }
}

/** Spend rows marked as answers whose page was never committed (paid all the same). */
export function paidNotCommitted(rows: readonly SpendRow[]): SpendRow[] {
  return rows.map((row) => ({ ...row, uncommitted: true }));
}
