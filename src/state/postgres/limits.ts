import { randomBytes } from 'node:crypto';
import { KEY_SECRET_BYTES, type LimitStore } from '../limit-store.ts';
import { limitStatements } from './statements.ts';
import { type StoreParts, storeQuery } from './store-parts.ts';

type Row = { fingerprint: string; api: string; rate: number; above: number | null; learned_at: Date };

/**
 * Keys' remembered limits in PostgreSQL (docs/scheduler.md#a-remembered-start), the schema's, whatever the pipeline;
 * and the schema's secret for their fingerprints: an insert that does nothing once a secret is there (a second one
 * racing it waits for the first to commit, then does nothing), then read back, so that processes asking together all
 * get the one that stands.
 */
export function postgresLimits(parts: StoreParts): LimitStore {
  const sql = limitStatements(parts.s);
  return {
    async keySecret() {
      await storeQuery(parts, sql.makeSecret, [randomBytes(KEY_SECRET_BYTES).toString('base64url')]);
      const [row] = await storeQuery<{ value: string }>(parts, sql.secret);
      return Buffer.from((row as { value: string }).value, 'base64url');
    },
    async rememberedLimits(api, fingerprints) {
      const rows = await storeQuery<Row>(parts, sql.limitsOf, [api, [...fingerprints]]);
      return rows.map((row) => ({ fingerprint: row.fingerprint, api: row.api, rate: row.rate, above: row.above, learnedAt: row.learned_at.toISOString() }));
    },
    async rememberLimits(limits) {
      if (limits.length === 0) return;
      const column = <K extends keyof (typeof limits)[number]>(key: K) => limits.map((limit) => limit[key]);
      // The same rows written twice are the same rows: safe to send again.
      await storeQuery(parts, sql.remember, [column('fingerprint'), column('api'), column('rate'), column('above'), column('learnedAt')]);
    },
  };
}
