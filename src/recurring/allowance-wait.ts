import type { RunRecord } from '../state/interfaces.ts';

/** A key of a run stopped by its allowance, as its summary has it (run/summary.ts: `allowance`). */
interface KeyOut {
  key: string;
  period: string;
  /** When the key's next period opens (ISO 8601); null: its share of the run's occurrence was spent. */
  opensAt: string | null;
}

function keysOut(run: RunRecord): KeyOut[] {
  const listed = run.summary?.allowance;
  if (!Array.isArray(listed)) return [];
  return listed.filter(
    (each): each is KeyOut => typeof each === 'object' && each !== null && typeof each.key === 'string' && typeof each.period === 'string' && (each.opensAt === null || typeof each.opensAt === 'string'),
  );
}

/**
 * Why an occurrence due at `dueAt` would send nothing (docs/schedules.md#allowances-and-the-worker): the pipeline's
 * latest run stopped with status `allowance`, and every key it stopped on is out of its allowance's period until
 * after the occurrence. Then the occurrence is skipped, saying so, and the first occurrence in a period that opens
 * takes the run up again (the same run, where it stopped). Undefined when it would send: another status, or a key
 * whose share of its occurrence was spent (a spread allowance: the next occurrence has a share of its own).
 */
export function allowanceWait(latest: RunRecord | undefined, dueAt: number): string | undefined {
  if (latest?.status !== 'allowance') return undefined;
  const out = keysOut(latest);
  if (out.length === 0 || out.some((each) => each.opensAt === null)) return undefined;
  const opens = Math.min(...out.map((each) => Date.parse(each.opensAt as string)));
  if (!(dueAt < opens)) return undefined;
  const keys = out.map((each) => `key "${each.key}" spent its allowance for ${each.period}`).join(', ');
  return `run ${latest.runId} stopped on its keys' allowance (${keys}): nothing is sent before ${new Date(opens).toISOString()}, when the first occurrence takes it up again`;
}
