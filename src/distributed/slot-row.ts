// The run's or a key's row of shared limits as a slot statement answers it (shared-pacer.ts, statements.ts), and the
// retirements a key's row holds.

/** A key retired by some worker: for the run (no path), or for an endpoint. */
export interface KeyRetirement {
  reason: 'unauthorized' | 'payment_required' | 'forbidden';
  message: string;
  path?: string;
}

export interface SlotRow {
  interval_ms: number;
  wait_ms: number;
  slot_epoch_ms: number;
  stop_reason: string | null;
  stop_message: string | null;
  accepted: string;
  rejected: string;
  rejected_sent_epoch_ms: number | null;
  /** How many of the 429s this statement carried it counted (those a cut did not answer already). */
  counted_rejected: number;
  /** A key's row: retired for the run (a 401), and for endpoints (path: why). */
  retired_reason: string | null;
  retired_message: string | null;
  retired_paths: Record<string, { reason: string; message: string }> | null;
}

/** A key's retirements as its row holds them (values from the database: only the reasons a worker writes count). */
export function retirementsOf(row: SlotRow): KeyRetirement[] {
  const known = (reason: string): reason is KeyRetirement['reason'] => reason === 'unauthorized' || reason === 'payment_required' || reason === 'forbidden';
  const all: KeyRetirement[] = [];
  if (row.retired_reason !== null && known(row.retired_reason)) all.push({ reason: row.retired_reason, message: row.retired_message ?? '' });
  for (const [path, each] of Object.entries(row.retired_paths ?? {})) if (known(each.reason)) all.push({ reason: each.reason, message: String(each.message), path });
  return all;
}
