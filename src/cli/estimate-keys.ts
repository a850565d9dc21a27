import { readApiKeys, unknownKeyLabels } from '../client/api-keys.ts';
import type { Pipeline } from '../config/define.ts';
import { ValidationError } from '../errors/validation-error.ts';
import { duration } from './progress.ts';

/** The pool's part of an estimate: each key's rate, their sum, and the worst case's time at it. */
export interface PoolEstimate {
  from: string;
  keys: { label: string; requestsPerSecond: number | null }[];
  /** The keys' rates together; null when a key is unpaced (no rate bounds the time). */
  requestsPerSecond: number | null;
  /** The worst case's requests at that rate, in seconds (429s, pauses and retries aside); null: unpaced. */
  worstCaseSeconds: number | null;
}

/**
 * The worst case's time at the keys' rates (docs/pipelines.md#a-pool-of-keys): the environment's keys, by label only
 * — nothing is sent, no key is shown —, each at its `keys.<label>.requestsPerSecond` or the pipeline's `rate`. None
 * when the environment holds no key. A setting for a label the environment does not hold is refused, as `run` does.
 */
export function estimatePool(pipeline: Pipeline, requests: number, env: Readonly<Record<string, string | undefined>>): PoolEstimate | undefined {
  const pool = readApiKeys(env);
  if (!pool) return undefined;
  const labels = pool.keys.map((key) => key.label);
  const unknown = unknownKeyLabels(pipeline.keys, labels, pool.from);
  if (unknown.length > 0) throw new ValidationError(`Pipeline "${pipeline.name}" names keys the environment does not hold`, unknown);
  const { rate } = pipeline;
  const shared = rate.requestsPerSecond ?? (rate.requests && rate.intervalMs ? (rate.requests * 1000) / rate.intervalMs : undefined);
  const keys = labels.map((label) => ({ label, requestsPerSecond: pipeline.keys?.[label]?.requestsPerSecond ?? shared ?? null }));
  const paced = keys.every((key) => key.requestsPerSecond !== null);
  const sum = paced ? keys.reduce((total, key) => total + (key.requestsPerSecond as number), 0) : null;
  return { from: pool.from, keys, requestsPerSecond: sum === null ? null : round(sum), worstCaseSeconds: sum === null ? null : Math.ceil(requests / sum) };
}

/** The pool's lines of `estimate`: `keys: 3 from WEBDATA_API_KEYS (fast 20 r/s, …), 30 requests/s together`. */
export function poolLines(pool: PoolEstimate): string[] {
  const each = pool.keys.map((key) => `${key.label} ${key.requestsPerSecond === null ? 'unpaced' : `${round(key.requestsPerSecond)} r/s`}`).join(', ');
  const count = `${pool.keys.length} key${pool.keys.length === 1 ? '' : 's'}`;
  return [
    `keys: ${count} from ${pool.from} (${each})${pool.requestsPerSecond === null ? '' : `, ${pool.requestsPerSecond} requests/s together`}`,
    pool.worstCaseSeconds === null
      ? 'time (worst case): not bounded by a rate (a key is unpaced: set rate.requestsPerSecond)'
      : `time (worst case, at the keys' rates): ${duration(pool.worstCaseSeconds * 1000)} (429s, pauses and retries aside)`,
  ];
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

