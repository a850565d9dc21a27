import type Database from 'better-sqlite3';
import type { Checkpoint } from '../interfaces.ts';

/**
 * Sink checkpoints, in whichever database the sink commits to: a SQLite sink keeps its checkpoint in its own file
 * (updated in the same transaction as its rows); file sinks keep theirs in the state store (updated right after
 * their synchronous write).
 */
export function sinkCheckpoints(db: Database.Database) {
  db.exec(`CREATE TABLE IF NOT EXISTS sink_checkpoints (sink_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, bytes INTEGER, updated_at TEXT NOT NULL)`);
  const get = db.prepare(`SELECT seq, bytes FROM sink_checkpoints WHERE sink_id = ?`);
  const set = db.prepare(`
    INSERT INTO sink_checkpoints (sink_id, seq, bytes, updated_at) VALUES (?, ?, ?, ?)
    ON CONFLICT (sink_id) DO UPDATE SET seq = excluded.seq, bytes = excluded.bytes, updated_at = excluded.updated_at`);
  return {
    get(sinkId: string): Checkpoint | undefined {
      return get.get(sinkId) as Checkpoint | undefined;
    },
    set(sinkId: string, checkpoint: Checkpoint): void {
      set.run(sinkId, checkpoint.seq, checkpoint.bytes, new Date().toISOString());
    },
  };
}

