import type { KeyAllowanceNow } from '../analytics/key-allowances.ts';
import { finite, text } from '../report/read-values.ts';

/** How `spend` groups the credits: by day and key, by key and period, or by pipeline, key and period. */
export const SPEND_BY = ['day', 'key', 'pipeline'] as const;
export type SpendBy = (typeof SPEND_BY)[number];

/** A key's allowance as `spend` shows it. */
export interface ShownAllowance {
  credits: number;
  per: 'day' | 'month';
  timezone: string;
}

/** One line of `spend`: what a key spent (on a day, in a period, for a pipeline), against its allowance. */
export interface SpendLine {
  day?: string;
  pipeline?: string;
  /** The key's label (the labels pipelines give it, `/` between them); null: the ledger named no key (older rows, a token). */
  key: string | null;
  /** Its fingerprint under the database's secret (a keyed hash, never the key); null as `key`. */
  keyFingerprint: string | null;
  /** The allowance's period (`2026-11-27`, `2026-11`); null: the key has no allowance. */
  period: string | null;
  credits: number;
  requests: number;
  allowance: ShownAllowance | null;
  /** What is left of the period now (its spend, every pipeline's, and standing holds taken out); null: no allowance. */
  left: number | null;
  /** This line's credits as a share of the allowance (0.25: a quarter); null: no allowance. */
  share: number | null;
}

interface Group {
  line: SpendLine;
  /** Whose labels name the key on this line: the key's (by day, by key), or the pipeline's for it (by pipeline). */
  labelsOf: string;
}

const round = (n: number, places: number) => Math.round(n * 10 ** places) / 10 ** places;

/** A row of webdata_spend as `spend` reads it: every value converted on the way in (the file may have been edited). */
function readRow(row: Record<string, unknown>) {
  const credits = finite(row.allowance_credits);
  const per = row.allowance_per === 'day' || row.allowance_per === 'month' ? row.allowance_per : undefined;
  const allowance: ShownAllowance | null =
    credits !== undefined && credits > 0 && per !== undefined ? { credits, per, timezone: text(row.allowance_timezone) } : null;
  return {
    day: text(row.day),
    pipeline: text(row.pipeline),
    label: text(row.key_label),
    fingerprint: text(row.key_fingerprint) || null,
    period: allowance === null ? null : text(row.period) || null,
    credits: finite(row.credits) ?? 0,
    requests: finite(row.requests) ?? 0,
    allowance,
    left: allowance === null ? null : (finite(row.period_left) ?? null),
  };
}

/**
 * The lines of `spend`, grouped `by` from webdata_spend's rows (one per day, key, pipeline, run and period). A key is
 * told apart by its fingerprint, so that one key two pipelines label differently is one line with both labels; with
 * `--by key`, each recorded allowance also has a line for the period it is in now (`now`), spent or not.
 */
export class SpendLines {
  readonly #by: SpendBy;
  readonly #groups = new Map<string, Group>();
  /** The labels each key goes by: across every pipeline, or each pipeline's own (`--by pipeline`). */
  readonly #labels = new Map<string, Set<string>>();

  constructor(by: SpendBy) {
    this.#by = by;
  }

  add(row: Record<string, unknown>): void {
    const read = readRow(row);
    const keyId = read.fingerprint ?? (read.label ? `label:${read.label}` : '');
    const id = [this.#by === 'day' ? read.day : '', this.#by === 'pipeline' ? read.pipeline : '', keyId, read.period ?? ''].join('\u0000');
    const labelsOf = this.#by === 'pipeline' ? `${read.pipeline}\u0000${keyId}` : keyId;
    let group = this.#groups.get(id);
    if (group === undefined) {
      const line: SpendLine = {
        ...(this.#by === 'day' ? { day: read.day } : {}),
        ...(this.#by === 'pipeline' ? { pipeline: read.pipeline } : {}),
        key: null,
        keyFingerprint: read.fingerprint,
        period: read.period,
        credits: 0,
        requests: 0,
        allowance: read.allowance,
        left: read.left,
        share: null,
      };
      group = { line, labelsOf };
      this.#groups.set(id, group);
    }
    if (read.label) this.#label(labelsOf, read.label);
    group.line.credits += read.credits;
    group.line.requests += read.requests;
  }

  /** Each recorded allowance's current period, with what is left of it now, where no row of it was added. */
  addCurrentPeriods(allowances: readonly KeyAllowanceNow[]): void {
    for (const allowance of allowances) {
      const id = ['', '', allowance.fingerprint, allowance.period].join('\u0000');
      if (this.#groups.has(id)) continue;
      const line: SpendLine = {
        key: null,
        keyFingerprint: allowance.fingerprint,
        period: allowance.period,
        credits: 0,
        requests: 0,
        allowance: { credits: allowance.credits, per: allowance.per, timezone: allowance.timezone },
        left: allowance.left,
        share: null,
      };
      this.#groups.set(id, { line, labelsOf: allowance.fingerprint });
      // The label of the pipeline that recorded it, where no spend names the key otherwise.
      if (!this.#labels.has(allowance.fingerprint)) this.#label(allowance.fingerprint, text(allowance.label));
    }
  }

  #label(of: string, label: string): void {
    const labels = this.#labels.get(of);
    if (labels) labels.add(label);
    else this.#labels.set(of, new Set([label]));
  }

  /** The lines, in order: by day, then key; by key, then period; by pipeline, then key and period. */
  lines(): SpendLine[] {
    const lines = [...this.#groups.values()].map(({ line, labelsOf }) => ({
      ...line,
      key: this.#labels.has(labelsOf) ? [...(this.#labels.get(labelsOf) as Set<string>)].sort().join('/') : null,
      credits: round(line.credits, 6),
      share: line.allowance === null ? null : round(line.credits / line.allowance.credits, 4),
    }));
    const order = (line: SpendLine) => [line.day ?? '', line.pipeline ?? '', line.key ?? '', line.keyFingerprint ?? '', line.period ?? ''];
    return lines.sort((a, b) => {
      const [x, y] = [order(a), order(b)];
      const at = x.findIndex((value, i) => value !== y[i]);
      return at === -1 ? 0 : (x[at] as string) < (y[at] as string) ? -1 : 1;
    });
  }
}
