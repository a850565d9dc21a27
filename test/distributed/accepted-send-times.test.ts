// Issue 43, item 6: the leader of a distributed run learns the shared limit from every worker's answers, which reach
// it through the run's row. It heard the others' accepted answers as counts, timed when it heard them (a few hundred ms
// late at a shared 10 r/s): those sent before the run's first 429 were missing from the burst the opening showed, and a
// failed raise fell back over the limit (bench (j): 12.79 → 11.13 against nginx's 10). The row now keeps when the
// followers' latest accepted requests were sent, on a real PostgreSQL cluster.
import { expect, it } from 'vitest';
import { type SharedSlot, sharedPacer } from '../../src/distributed/shared-pacer.ts';
import { ACCEPTED_SENT_KEPT } from '../../src/distributed/statements.ts';
import type { Clock } from '../../src/schedule/clock.ts';
import { describePostgres, sql } from '../postgres/pg.ts';
import { migratedDatabase } from './migrated-database.ts';

const S = 'webdata';

describePostgres("the followers' accepted send times in the run's row", () => {
  const db = migratedDatabase(S);
  const { pool } = db;

  it("a follower's accepted answers reach the leader's next slot with when they were sent; the leader's own are not in them; the row keeps the latest few", async () => {
    const id = 'run-sent-times';
    await sql(db.url, `INSERT INTO ${S}.run_limits (run_id, budget, interval_ms) VALUES ($1, NULL, 1)`, [id]);
    let now = 1_000_000;
    const clock: Clock = { now: () => now, sleep: async (ms) => void (now += ms) };
    const heard: SharedSlot[] = [];
    const leading = sharedPacer(pool(), S, id, { leads: () => true, onSlot: (slot) => heard.push(slot) });
    const following = sharedPacer(pool(), S, id, { leads: () => false });
    const leader = leading(1000, clock);
    const follower = following(1000, clock);
    // Each worker's first slot tells it the database's clock against its own.
    await leader.acquire();
    await follower.acquire();

    following.report(true, now - 100);
    following.report(true, now - 50);
    following.report(false, now - 40);
    leading.report(true, now - 30);
    await follower.acquire();
    await leader.acquire();
    const slot = heard.at(-1) as SharedSlot;
    expect(slot.outcomes).toEqual({ accepted: 3, rejected: 1 });
    // The follower's two, on the leader's clock (both clocks stand still here while the database's runs on: within
    // the real time the statements took), 50 ms apart as they were sent; not the 429, nor the leader's own.
    expect(slot.acceptedSent.count).toBe(2);
    expect(slot.acceptedSent.sentAt).toHaveLength(2);
    const [first, second] = slot.acceptedSent.sentAt as [number, number];
    expect(second - first).toBeCloseTo(50, 1);
    expect(Math.abs(first - (now - 100))).toBeLessThan(5_000);

    // Many answers between two of the leader's slots: the row keeps the latest, newest last, and counts them all.
    for (let i = 0; i < 40; i++) following.report(true, now + i);
    await follower.acquire();
    await leader.acquire();
    const after = heard.at(-1) as SharedSlot;
    expect(after.acceptedSent.count).toBe(42);
    expect(after.acceptedSent.sentAt).toHaveLength(ACCEPTED_SENT_KEPT);
    const kept = after.acceptedSent.sentAt;
    expect((kept.at(-1) as number) - (kept[0] as number)).toBeCloseTo(ACCEPTED_SENT_KEPT - 1, 1);
    expect(after.outcomes.accepted).toBe(43);
  });
});
