import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { KEY_SECRET_BYTES, type LimitStore, type RememberedLimit } from '../limit-store.ts';
import { limitStatements } from './key-statements.ts';

/**
 * Keys' remembered limits in a SQLite state file (docs/scheduler.md#a-remembered-start), and the file's secret for
 * their fingerprints: one insert that only the first process's takes (`INSERT OR IGNORE` on the key, under SQLite's
 * write lock), then read back, so that processes asking together all get the one that stands.
 */
export function sqliteLimits(db: Database.Database): LimitStore {
  const statements = limitStatements(db);
  const remember = db.transaction((limits: readonly RememberedLimit[]) => {
    for (const limit of limits) statements.remember.run(limit.fingerprint, limit.api, limit.rate, limit.above, limit.learnedAt);
  });
  return {
    async keySecret() {
      statements.makeSecret.run(randomBytes(KEY_SECRET_BYTES).toString('base64url'));
      return Buffer.from(statements.secret.get() as string, 'base64url');
    },
    async rememberedLimits(api, fingerprints) {
      return fingerprints.flatMap((fingerprint) => {
        const row = statements.limitOf.get(api, fingerprint) as RememberedLimit | undefined;
        return row ? [row] : [];
      });
    },
    async rememberLimits(limits) {
      remember(limits);
    },
  };
}
