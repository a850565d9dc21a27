// A spend row written while another connection writes the state file (the run's commit thread, another process): it
// waits for the write lock, as every writer of the file does, rather than failing. Its transaction reads (the zone of
// the key's allowance, for the row's day) before it writes; begun deferred, its snapshot was taken before the other's
// commit and SQLite refused the write at once, busy timeout or not (SQLITE_BUSY: a run under load ended "locked by
// another process", exit 75 — seen in test/run/faults.test.ts and key-pool-visible.test.ts on a loaded machine).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/open-database.ts';
import type { SpendRow } from '../../src/state/spend-store.ts';
import { sqliteStateStore } from '../../src/state/sqlite/store.ts';
import { workdir } from '../pipeline-helpers.ts';
import { spendRowOf } from './spend-rows.ts';

const row: SpendRow = spendRowOf({ status: '500', credits: 0, key: { fingerprint: 'fp-a', label: 'default', period: null, holder: null } });

/** Another process that takes the file's write lock, says so, writes, holds it `ms`, then commits. */
function otherWriter(path: string, ms: number) {
  const script = `
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(process.argv[1]);
    db.exec('PRAGMA busy_timeout = 5000; BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS other (x); INSERT INTO other VALUES (1)');
    process.stdout.write('locked\\n');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Number(process.argv[2]));
    db.exec('COMMIT');
  `;
  const child = spawn(process.execPath, ['-e', script, path, String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const locked = new Promise<void>((resolve) => child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('locked') && resolve()));
  return { locked, exited: once(child, 'exit') };
}

describe('a spend row written while another connection writes the state file', () => {
  it('waits for the write lock and is written', async () => {
    using dir = workdir();
    const path = dir.path('state.sqlite');
    const db = openDatabase(path);
    const store = sqliteStateStore(db, { commitThread: false });
    // Read something first, so that the connection has seen the file as it is before the other commits.
    await store.spend([{ ...row, seriesId: 'first' }]);
    const other = otherWriter(path, 300);
    await other.locked;
    await store.spend([row]);
    await other.exited;
    expect(db.prepare('SELECT COUNT(*) FROM spend').pluck().get()).toBe(2);
    db.close();
  });
});
