import { retrying } from '../postgres/failure.ts';
import { type Pool } from '../postgres/pools.ts';
import { quoteIdentifier } from '../sql-identifier.ts';
import type { FleetKey, FleetKeys, Retirement } from '../schedule/fleet-key.ts';
import type { SharedPacerFactory } from './shared-pacer.ts';
import { keyStatements } from './statements.ts';

/**
 * The scheduler's `fleet` option in a distributed run (docs/distributed.md#a-pool-of-keys-across-workers): each key of
 * a pool as every worker holding it shares it, in its row of `run_key_limits` — its share of the credits
 * (`keys.<label>.maxCredits`) reserved there in one conditional UPDATE, so that no interleaving of workers passes it;
 * its retirement written there and told on the run's channel, and read back by every worker with the next slot its
 * pacer takes from the same row (`pacer.retirements`). The run's budget stays the run's meter's (shared-meter.ts).
 */
export function sharedKeys(pool: Pool, schema: string, runId: string, pacer: SharedPacerFactory, where = `the shared keys (PostgreSQL, schema "${schema}")`): FleetKeys {
  const statements = keyStatements(quoteIdentifier(schema));
  return (label, maxCredits) => new SharedKey({ pool, statements, runId, label, maxCredits, pacer, where });
}

/**
 * Claims each label of this worker's keys for the key it holds, by fingerprint (the state schema's secret): the first
 * worker's key stands for a label in the run. Answers the labels under which this worker holds another key than the
 * run's — which would share one key's limit, share and retirement between two keys (docs/distributed.md#a-pool-of-keys-across-workers).
 */
export async function claimKeyLabels(pool: Pool, schema: string, runId: string, fingerprints: ReadonlyMap<string, string>): Promise<string[]> {
  const statements = keyStatements(quoteIdentifier(schema));
  const where = `the shared keys (PostgreSQL, schema "${schema}")`;
  const others: string[] = [];
  for (const [label, fingerprint] of fingerprints) {
    const { rows } = await retrying(where, () => pool.query<{ fingerprint: string | null }>(statements.claim, [runId, label, fingerprint]), { idempotent: true });
    if (rows[0]?.fingerprint !== fingerprint) others.push(label);
  }
  return others;
}

interface Parts {
  pool: Pool;
  statements: ReturnType<typeof keyStatements>;
  runId: string;
  label: string;
  maxCredits: number | undefined;
  pacer: SharedPacerFactory;
  where: string;
}

class SharedKey implements FleetKey {
  readonly #parts: Parts;
  /** The key's row written with its share (if no worker wrote it first): reservations wait for it. */
  readonly #ready: Promise<unknown> | undefined;
  /** Settled reservations not yet written: one statement for all that settled meanwhile. */
  #batch = { held: 0, spent: 0 };
  #draining: Promise<void> | undefined;

  constructor(parts: Parts) {
    this.#parts = parts;
    if (parts.maxCredits !== undefined) this.#ready = this.#query(parts.statements.ensure, [parts.label, 0, parts.maxCredits], true);
  }

  reserve(weight: number): boolean | Promise<boolean> {
    const ready = this.#ready;
    if (ready === undefined) return true;
    // Retried as if idempotent: an answer lost after the update ran leaves `weight` reserved that no request holds,
    // which the share then lacks; it is never handed out twice.
    return ready.then(async () => (await this.#query(this.#parts.statements.reserve, [this.#parts.label, weight], true)).length > 0);
  }

  settle(weight: number, charged: number): void {
    if (this.#ready === undefined) return;
    this.#batch.held += weight;
    this.#batch.spent += charged;
    this.#draining ??= this.#drain();
  }

  retire(retirement: Retirement): void {
    const { label, statements, pacer } = this.#parts;
    // The first retirement of each kind stands: safe to repeat. A write that fails leaves the others to meet the
    // key's answer themselves, one request each, as before keys were shared.
    void this.#query(statements.retire, [label, retirement.reason, retirement.message, retirement.path ?? null, pacer.channel], true).catch(() => undefined);
  }

  heard(): ReturnType<FleetKey['heard']> {
    return this.#parts.pacer.retirements(this.#parts.label);
  }

  /**
   * Not retried once sent: a batch applied twice would give its reservations back twice. One that fails leaves them
   * held: the key's share is then used less, never passed.
   */
  async #drain(): Promise<void> {
    await Promise.resolve();
    try {
      while (this.#batch.held !== 0 || this.#batch.spent !== 0) {
        const batch = this.#batch;
        this.#batch = { held: 0, spent: 0 };
        await this.#query(this.#parts.statements.settle, [this.#parts.label, batch.held, batch.spent], false).catch(() => undefined);
      }
    } finally {
      this.#draining = undefined;
    }
  }

  async #query(text: string, values: unknown[], idempotent: boolean): Promise<unknown[]> {
    const { pool, runId, where } = this.#parts;
    return retrying(where, async () => (await pool.query(text, [runId, ...values])).rows, { idempotent });
  }
}
