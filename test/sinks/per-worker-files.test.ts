import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { toCsv } from '../../src/sinks/csv.ts';
import type { SinkContext } from '../../src/sinks/sink.ts';
import type { Checkpoint } from '../../src/state/interfaces.ts';
import { OUTPUT_REGISTRY } from '../../src/state/sqlite/output-claims.ts';
import { workdir } from '../pipeline-helpers.ts';

/** What a distributed run gives a sink as it opens: shared, checkpoints kept in memory here. */
function sharedContext(dir: string): SinkContext & { close(): void } {
  const databases = new Map<string, Database.Database>();
  const checkpoints = new Map<string, Checkpoint>();
  return {
    runId: 'run-1',
    pipeline: 'p',
    database(path) {
      let db = databases.get(path);
      if (!db) databases.set(path, (db = new Database(path)));
      return db;
    },
    postgres: () => {
      throw new Error('no PostgreSQL here');
    },
    stateCheckpoints: { get: async (id) => checkpoints.get(id), set: async (id, checkpoint) => void checkpoints.set(id, checkpoint) },
    currentSeq: 0,
    statePath: join(dir, 'state'),
    tagColumns: [],
    shared: true,
    close() {
      for (const db of databases.values()) db.close();
    },
  };
}

it("a worker's file is not taken from a process that still lives, however long since it renewed its lease (a frozen worker wakes to write)", async () => {
  using dir = workdir();
  const ctx = sharedContext(dir.dir);
  // Another worker's process on this host, alive but frozen long past the lease's renewal, holds slot 1.
  const frozen = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  try {
    const sink = toCsv({ path: dir.path('out.csv'), perWorker: true });
    const registry = ctx.database(join(dir.dir, OUTPUT_REGISTRY));
    registry.exec(`CREATE TABLE IF NOT EXISTS output_leases (output TEXT PRIMARY KEY, pipeline TEXT NOT NULL, holder TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, acquired_at TEXT NOT NULL, renewed_at INTEGER NOT NULL)`);
    const slotOne = `file:out.${hostname().replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 64)}-1.csv`;
    registry.prepare(`INSERT INTO output_leases VALUES (?, 'p', 'frozen', ?, ?, '2026-11-23T00:00:00.000Z', 0)`).run(slotOne, frozen.pid, hostname());
    await sink.open(ctx);
    expect(sink.path).toMatch(/out\..+-2\.csv$/);
    await sink.close();
  } finally {
    frozen.kill('SIGKILL');
    ctx.close();
  }
});
