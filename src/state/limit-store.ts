/**
 * What a key learned of the server's limit, kept for the next run of any pipeline of the database that sends with it
 * (docs/scheduler.md#a-remembered-start). A key is known here only by its fingerprint, a keyed hash under the
 * database's own secret (`keySecret`, client/api-keys.ts): never by its value.
 */
export interface RememberedLimit {
  /** The key's fingerprint under the database's secret. */
  fingerprint: string;
  /** The API it was learned against: the base URL's origin and path. A key's limit is its service's. */
  api: string;
  /** Requests a second that held. */
  rate: number;
  /** The lowest rate that earned a 429, when one did. */
  above: number | null;
  /** When it was learned (ISO 8601): an old limit is a first guess, not a fact. */
  learnedAt: string;
}

/** The state store's memory of keys' limits. */
export interface LimitStore {
  /**
   * The database's own secret for keys' fingerprints: made at random the first time it is asked for, once whatever
   * the number of processes asking together, the same ever after. Never shown: it would let a key be tried against
   * its fingerprint.
   */
  keySecret(): Promise<Uint8Array>;
  /** What was learned for these fingerprints against `api`. */
  rememberedLimits(api: string, fingerprints: readonly string[]): Promise<RememberedLimit[]>;
  /** Keeps what was learned, in place of what was before for the same key and API. */
  rememberLimits(limits: readonly RememberedLimit[]): Promise<void>;
}

/** The secret's length: an HMAC-SHA256 key as long as its output. */
export const KEY_SECRET_BYTES = 32;
