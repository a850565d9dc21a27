import type Database from 'better-sqlite3';
import type { Checkpoint } from '../interfaces.ts';
import { CHECKPOINT_SQL } from './statements.ts';

/**
 * Sink checkpoints, in whichever database the sink commits to: a SQLite sink keeps its checkpoint in its own file
 * (updated in the same transaction as its rows); file sinks keep theirs in the state store (updated in the page's
 * transaction, just after their bytes were appended).
 */
export function sinkCheckpoints(db: Database.Database) {
  db.exec(CHECKPOINT_SQL.table);
  const get = db.prepare(CHECKPOINT_SQL.get);
  const set = db.prepare(CHECKPOINT_SQL.set);
  return {
    get(sinkId: string): Checkpoint | undefined {
      return get.get(sinkId) as Checkpoint | undefined;
    },
    set(sinkId: string, checkpoint: Checkpoint): void {
      set.run(sinkId, checkpoint.seq, checkpoint.bytes, new Date().toISOString());
    },
  };
}

