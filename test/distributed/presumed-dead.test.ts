import { expect, it } from 'vitest';
import { simulator } from '../helpers.ts';
import { workdir } from '../pipeline-helpers.ts';
import { config, envFor, startCli } from '../cli-helpers.ts';
import { describePostgres, sql, testDatabase } from '../postgres/pg.ts';

const QUERIES = Array.from({ length: 12 }, (_, i) => `query ${i}`);
// The stale limit made short (30 s in use), so that a worker late for it is a matter of seconds here.
const STALE = { WEBDATA_STALE_SECONDS: '8' };

/** Resolves once `check` holds, asked every 200 ms; fails after `seconds` (a bound, not a guess at when it holds). */
async function eventually(check: () => Promise<boolean>, what: string, seconds = 90): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${seconds} s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describePostgres('a worker presumed dead (late for the stale limit while another works)', () => {
  it('stops with exit 75 (try again: it may rejoin), though no signal stopped it, and says why on stderr even with --quiet; the other completes the run', async () => {
    await using sim = await simulator({ seed: 43, latencyMs: { min: 5, max: 20 } });
    using dir = workdir();
    const db = await testDatabase();
    try {
      const file = config(dir.dir, { name: 'late', sinks: [{ type: 'postgres', table: 'results', url: db.url }], state: { url: db.url }, rate: { concurrency: 2 } }, { queries: QUERIES, maxPages: 3 });
      const env = { ...envFor(sim.url), ...STALE };
      // The late worker's first request is held until it is frozen: it is then late for its beats, as a worker whose
      // event loop or database session is busy for longer than the stale limit is.
      const first = sim.park({ q: 'query 0' });
      const late = startCli(['run', file, '--quiet'], { cwd: dir.dir, env });
      await late.whileRunning(first.reached(1));
      late.child.kill('SIGSTOP');
      first.release();
      // The other worker stays at work (its last series held) while it takes the late one for dead.
      const last = sim.park({ q: 'query 11' });
      const other = startCli(['run', file], { cwd: dir.dir, env });
      await other.whileRunning(last.reached(1));
      const pid = late.child.pid;
      await other.whileRunning(eventually(async () => (await sql(db.url, `SELECT 1 FROM webdata.workers WHERE pid = $1 AND status = 'dead'`, [pid])).length === 1, 'the late worker marked dead'));
      late.child.kill('SIGCONT');
      const ended = await late.done;
      // Resumable, it may join again: 75, to try again (130 was a signal's, which none sent, and a supervisor that takes
      // a signal's 130 for a clean stop would not start it again); and it said why.
      expect(ended.code).toBe(75);
      expect(ended.stderr).toContain('this worker was presumed dead (no heartbeat for 8 s)');
      last.release();
      const done = await other.done;
      expect(done.code, done.stderr).toBe(0);
      expect(done.stderr).not.toContain('ERROR');
      const run = await sql(db.url, `SELECT status FROM webdata.runs ORDER BY started_at DESC LIMIT 1`);
      expect(run).toEqual([{ status: 'completed' }]);
    } finally {
      await db.drop();
    }
  });
});
