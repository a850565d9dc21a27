// Processes that open one new SQLite state file at the same moment (two `webdata-etl worker`s started together on one
// machine) each find it made, whoever made it: the schema is created once, under one write lock. Before, both could
// find no version and both insert it (CI: "UNIQUE constraint failed: webdata_meta.key", a worker exiting 1).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { STATE_SCHEMA_VERSION } from '../../src/state/sqlite/schema.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Each process loads what it needs, then waits for the same instant (argv[2]) to open the file: they start tens of
// milliseconds apart, which would hide the race.
const OPEN = `
import { openDatabase } from './src/open-database.ts';
import { sqliteStateStore } from './src/state/sqlite/store.ts';
const at = Number(process.argv[2]);
while (Date.now() < at);
const db = openDatabase(process.argv[1]);
sqliteStateStore(db);
db.close();
`;

async function opening(file: string, at: number): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', OPEN, file, String(at)], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stderr };
}

describe('a new state file opened by several processes at once', () => {
  it('is made once: every process opens it, and it holds this version', async () => {
    using dir = workdir();
    for (let round = 0; round < 4; round++) {
      const file = join(dir.dir, `state-${round}.sqlite`);
      // Far enough ahead for every process to have loaded (a bound, not a guess at timing: one late only opens later).
      const at = Date.now() + 3000;
      const results = await Promise.all(Array.from({ length: 8 }, () => opening(file, at)));
      for (const result of results) expect(result.code, result.stderr).toBe(0);
      expect(sqliteRows(file, `SELECT value FROM webdata_meta WHERE key = 'state_schema'`)).toEqual([{ value: String(STATE_SCHEMA_VERSION) }]);
    }
  });
});
