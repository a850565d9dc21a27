import type { KeyStats } from '../schedule/types.ts';
import { type KeySummary, keySummarySchema } from './summary.ts';

/**
 * The summary's `keys` (docs/pipelines.md#the-run-summary): a pool's keys as this invocation's scheduler saw them,
 * their counts added to those of the run's earlier invocations (as the summary's other figures are), by label. The
 * rate and learned limit are where this invocation ended; a key retired in an earlier invocation and not in this one
 * keeps its earlier retirement (it was, in that run), but for one out of its allowance (that was its period's). None
 * for one key: its figures are the run's own.
 */
export function summaryKeys(now: readonly KeyStats[], previous: Record<string, unknown> | null | undefined): { keys?: KeySummary[] } {
  if (now.length <= 1) return {};
  const before = new Map((storedKeys(previous?.keys) ?? []).map((key) => [key.label, key]));
  const keys = now.map((key): KeySummary => {
    const earlier = before.get(key.label);
    return {
      label: key.label,
      requests: key.requests + (earlier?.requests ?? 0),
      credits: key.credits + (earlier?.credits ?? 0),
      rateLimited: key.rateLimited + (earlier?.rateLimited ?? 0),
      // Unpaced is an infinite rate, which JSON cannot hold.
      rate: Number.isFinite(key.rate) ? round(key.rate) : null,
      learnedLimit: key.learnedLimit === null ? null : round(key.learnedLimit),
      // Out of its allowance is for a period: said by the invocation that found it so, not carried on.
      retired: key.retired ?? (earlier?.retired?.reason === 'allowance' ? null : earlier?.retired) ?? null,
    };
  });
  return { keys };
}

/**
 * A stored summary's keys, each kept only if it reads as one (a stored summary is a file like any other); undefined
 * when it has none (one key, or from before pools).
 */
export function storedKeys(stored: unknown): KeySummary[] | undefined {
  if (!Array.isArray(stored)) return undefined;
  return stored.flatMap((key) => {
    const read = keySummarySchema.safeParse(key);
    return read.success ? [read.data] : [];
  });
}

function round(rate: number): number {
  return Math.round(rate * 100) / 100;
}
