// An allowance spread over a schedule (docs/credits.md#spreading-an-allowance): occurrences left in a period of a
// daily and an hourly cron in zones with DST, planned shares that add up to the allowance, the last occurrence taking
// what is left; and runs in virtual time over real sockets against the simulator, the SQLite store's clock the run's:
// a run's share of its occurrence, kept when it is resumed in the same occurrence, the next occurrence's share of what
// is left; `allowance.spread` refused without a schedule to spread over.
import { describe, expect, it } from 'vitest';
import { definePipeline, normalize, run, searchPages, toSqlite } from '../../src/index.ts';
import { occurrenceAt, occurrencesLeft, plannedShares, shareOf } from '../../src/recurring/allowance-share.ts';
import { occurrencesOf } from '../../src/recurring/occurrences.ts';
import { periodAt } from '../../src/schedule/allowance-period.ts';
import { virtualClock } from '../../src/schedule/clock.ts';
import type { RunEvent } from '../../src/run/run-types.ts';
import { cli, config } from '../cli-helpers.ts';
import { rejection, simulator, TEST_KEY } from '../helpers.ts';
import { sqliteRows, workdir } from '../pipeline-helpers.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** The occurrences in a period, counted from its first. */
function inPeriod(cron: string, timezone: string, at: string, per: 'day' | 'month') {
  const occurrences = occurrencesOf({ cron, timezone });
  const period = periodAt(Date.parse(at), per, timezone);
  const first = occurrences.next(period.start - 1) as number;
  return { occurrences, period, first, left: occurrencesLeft(occurrences, first, period.end) };
}

describe('occurrences left in a period, and their shares', () => {
  it('an hourly cron in New York: 25 on the day the clocks go back, 23 on the day they go forward, 24 on others', () => {
    expect(inPeriod('0 * * * *', 'America/New_York', '2026-11-01T12:00:00Z', 'day').left).toEqual({ count: 25, exact: true });
    expect(inPeriod('0 * * * *', 'America/New_York', '2026-03-08T12:00:00Z', 'day').left).toEqual({ count: 23, exact: true });
    expect(inPeriod('0 * * * *', 'America/New_York', '2026-03-09T12:00:00Z', 'day').left).toEqual({ count: 24, exact: true });
    // A month of it in Berlin, whose clocks went forward on the 29th: 31 × 24 − 1.
    expect(inPeriod('0 * * * *', 'Europe/Berlin', '2026-03-15T00:00:00Z', 'month').left).toEqual({ count: 743, exact: true });
  });

  it('a daily cron at 06:00 in Berlin over October (the clocks go back on the 25th): 31, then one fewer each day, the last alone', () => {
    const { occurrences, period, first, left } = inPeriod('0 6 * * *', 'Europe/Berlin', '2026-10-15T00:00:00Z', 'month');
    expect(new Date(first).toISOString()).toBe('2026-10-01T04:00:00.000Z');
    expect(left.count).toBe(31);
    // After the change, 06:00 is 05:00 UTC: the 25th and the last day.
    expect(occurrencesLeft(occurrences, Date.parse('2026-10-25T05:00:00Z'), period.end).count).toBe(7);
    expect(occurrencesLeft(occurrences, Date.parse('2026-10-31T05:00:00Z'), period.end).count).toBe(1);
    // A run by hand between two occurrences counts itself and those to come; it belongs to the one before it.
    expect(occurrencesLeft(occurrences, Date.parse('2026-10-31T02:00:00Z'), period.end).count).toBe(2);
    expect(occurrenceAt(occurrences, Date.parse('2026-10-31T02:00:00Z'), period)).toBe(Date.parse('2026-10-30T05:00:00Z'));
    // Before the month's first occurrence, none of the month yet.
    expect(occurrenceAt(occurrences, Date.parse('2026-10-01T01:00:00Z'), period)).toBeUndefined();
    // More occurrences than credits: counting stops, the share is 0.
    expect(occurrencesLeft(occurrences, first, period.end, 5)).toEqual({ count: 6, exact: false });
    expect(shareOf(5, 6)).toBe(0);
  });

  it('planned: the whole allowance spread over the period, ⌊A/N⌋ each and one more for the last A mod N; the next month anew', () => {
    const { occurrences, period } = inPeriod('0 6 * * *', 'Europe/Berlin', '2026-10-15T00:00:00Z', 'month');
    const upcoming = occurrences.upcoming(35, period.start - 1);
    const shares = plannedShares({ credits: 1000, per: 'month', timezone: 'Europe/Berlin' }, occurrences, upcoming);
    const october = shares.filter((share) => share.period === '2026-10');
    expect(october).toHaveLength(31);
    expect(october.map((share) => share.share)).toEqual([...Array(23).fill(32), ...Array(8).fill(33)]);
    expect(october.reduce((sum, share) => sum + share.share, 0)).toBe(1000);
    expect(october.map((share) => share.occurrencesLeft)).toEqual(Array.from({ length: 31 }, (_, i) => 31 - i));
    // November: 30 occurrences, 33 each and the last ten 34.
    expect(shares.slice(31).map((share) => [share.period, share.share, share.ofOccurrences])).toEqual(Array(4).fill(['2026-11', 33, 30]));
    // Listed from mid-month: the same plan, not the whole allowance over what is left.
    const mid = plannedShares({ credits: 1000, per: 'month', timezone: 'Europe/Berlin' }, occurrences, occurrences.upcoming(2, Date.parse('2026-10-29T00:00:00Z')));
    expect(mid.map((share) => [share.share, share.occurrencesLeft, share.ofOccurrences])).toEqual([
      [33, 3, 31],
      [33, 2, 31],
    ]);
  });

  it("lived: each occurrence takes what is left over those left, and the month's last takes all that is left", () => {
    const { occurrences, period, first } = inPeriod('0 6 * * *', 'UTC', '2026-11-15T00:00:00Z', 'month');
    let left = 100;
    const taken: { share: number; leftBefore: number }[] = [];
    for (let at: number | null = first; at !== null && at < period.end; at = occurrences.next(at)) {
      const share = shareOf(left, occurrencesLeft(occurrences, at, period.end).count);
      taken.push({ share, leftBefore: left });
      // Odd occurrences spend a credit less than their share: what they leave goes to those after them.
      left -= taken.length % 2 === 1 ? Math.max(0, share - 1) : share;
    }
    expect(taken).toHaveLength(30);
    expect(taken[0]).toEqual({ share: 3, leftBefore: 100 });
    const last = taken.at(-1) as { share: number; leftBefore: number };
    expect(last.share).toBe(last.leftBefore);
    expect(last.share).toBeGreaterThan(3);
    expect(left).toBe(0);
  });
});

/** A pipeline run at 06:00 UTC each day with a month's allowance spread over the days, its rows in `path`. */
const daily = (path: string, credits: number, queries = ['espresso', 'kettle', 'grinder']) =>
  definePipeline({
    name: 'spread',
    source: searchPages({ queries, countries: ['us', 'gb'], maxPages: 3 }),
    stages: [normalize()],
    sinks: [toSqlite({ path, table: 'results' })],
    schedule: { cron: '0 6 * * *', timezone: 'UTC' },
    allowance: { credits, per: 'month', spread: 'even' },
    rate: { concurrency: 1 },
  });

/** Virtual time from 06:00 UTC on 1 November 2026 (an occurrence), shared by the simulator and the run (the SQLite store's clock). */
async function onVirtualTime() {
  const clock = virtualClock(0, Date.parse('2026-11-01T06:00:00.000Z'));
  const sim = await simulator({ clock: clock.now, epoch: clock.epoch });
  const events: RunEvent[] = [];
  const options = { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, clock, onEvent: (event: RunEvent) => void events.push(event) };
  const notes = () => events.flatMap((event) => (event.type === 'start' ? [event.notes] : []));
  return { clock, sim, options, events, notes, paid: () => sim.stats().credits.main?.debited ?? 0, [Symbol.asyncDispose]: () => sim.close() };
}

describe("a run's share of its occurrence (virtual time, over real sockets)", () => {
  it('spends what is left over the occurrences left, says so as it starts, and stops as allowance with nothing to resume at', async () => {
    await using t = await onVirtualTime();
    using dir = workdir();
    const first = await run(daily(dir.path('out.sqlite'), 60), t.options);
    // 60 credits over the 30 days of November: 2 today.
    expect(first).toMatchObject({ status: 'allowance', pages: { fetched: 2 }, message: 'key "default": its share for this run (2 credits) is spent' });
    expect(first.resumeAt).toBeUndefined();
    expect(first.allowance).toEqual([{ key: 'default', period: '2026-11', opensAt: null, timezone: 'UTC' }]);
    expect(t.notes()).toEqual([
      ['key "default": this occurrence\'s share is 2 credits (60 left of 60 credits a month (UTC) for 2026-11, spread over 30 occurrences left, this one included)'],
    ]);
    // The next day: 58 over 29.
    await t.clock.sleep(DAY);
    const next = await run(daily(dir.path('out.sqlite'), 60), t.options);
    expect(next).toMatchObject({ runId: first.runId, status: 'allowance', pages: { fetched: 4 } });
    expect(t.notes()[1]).toEqual(['key "default": this occurrence\'s share is 2 credits (58 left of 60 credits a month (UTC) for 2026-11, spread over 29 occurrences left, this one included)']);
    expect(t.paid()).toBe(4);
    expect(sqliteRows(dir.path('out.sqlite'), 'SELECT period, sum(credits) AS credits FROM spend GROUP BY period')).toEqual([{ period: '2026-11', credits: 4 }]);
  });

  it('a run resumed in the same occurrence keeps its share, no more: what it spent since the occurrence was due counts', async () => {
    await using t = await onVirtualTime();
    using dir = workdir();
    // 300 over 30: 10 today. Stopped after its third page, it is resumed an hour later, still today's occurrence.
    const stop = new AbortController();
    let pages = 0;
    const first = await run(daily(dir.path('out.sqlite'), 300), {
      ...t.options,
      signal: stop.signal,
      onEvent: (event) => {
        t.options.onEvent(event);
        if (event.type === 'page' && ++pages === 3) stop.abort();
      },
    });
    expect(first.status).toBe('interrupted');
    const spent = first.credits.spent;
    expect(spent).toBeGreaterThanOrEqual(3);
    expect(spent).toBeLessThan(10);
    await t.clock.sleep(HOUR);
    const resumed = await run(daily(dir.path('out.sqlite'), 300), t.options);
    expect(resumed).toMatchObject({ runId: first.runId, status: 'allowance', pages: { fetched: 10 } });
    expect(t.notes()[1]).toEqual([
      `key "default": this occurrence's share is 10 credits (300 left of 300 credits a month (UTC) for 2026-11, spread over 30 occurrences left, this one included; ` +
        `the run spent ${spent} of it since the occurrence was due, ${10 - spent} to go)`,
    ]);
    // Once more the same day: nothing.
    const again = await run(daily(dir.path('out.sqlite'), 300), t.options);
    expect(again).toMatchObject({ runId: first.runId, status: 'allowance', pages: { fetched: 10 } });
    expect(t.paid()).toBe(10);
    // Tomorrow's occurrence takes its own share of what is left: 290 over 29.
    await t.clock.sleep(DAY - HOUR);
    const tomorrow = await run(daily(dir.path('out.sqlite'), 300), t.options);
    expect(tomorrow).toMatchObject({ runId: first.runId, pages: { fetched: 18 }, status: 'completed' });
    expect(t.paid()).toBe(18);
  });

  it('spread with no schedule to spread over is refused before anything is sent, naming the field (exit 2 on the command line)', async () => {
    await using sim = await simulator();
    using dir = workdir();
    const file = config(dir.dir, { allowance: { credits: 100, per: 'month', spread: 'even' } });
    const refused = await cli(['run', file], { cwd: dir.dir, env: { WEBDATA_BASE_URL: sim.url, WEBDATA_API_KEY: TEST_KEY } });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`allowance.spread: "even" spreads what is left of the period over the schedule's occurrences, and this pipeline has no schedule`);
    const keyOwn = await cli(['estimate', config(dir.dir, { keys: { main: { allowance: { credits: 10, per: 'day', spread: 'even' } } } })], { cwd: dir.dir });
    expect(keyOwn.code).toBe(2);
    expect(keyOwn.stderr).toContain('keys.main.allowance.spread: "even" spreads');
    // run()'s allowance in place of the pipeline's, the same.
    const plain = definePipeline({ name: 'plain', source: searchPages({ queries: ['a'], countries: ['us'], maxPages: 1 }), stages: [normalize()], sinks: [toSqlite({ path: dir.path('plain.sqlite') })] });
    const error = await rejection(run(plain, { baseUrl: sim.url, apiKey: TEST_KEY, env: {}, allowance: { credits: 10, per: 'day', spread: 'even' } }));
    expect(error.message).toContain('allowance.spread: "even" spreads');
    expect(sim.stats().requests).toBe(0);
  });
});

describe('schedules and estimate show the shares of a spread allowance (as planned)', () => {
  // 100 credits a day over an hourly schedule in UTC: 24 occurrences, 4 each and 5 for the last four of the day; and
  // key "main"'s own 48 a day, 2 each. The occurrence at hour H has 24 − H left, itself included.
  const settings = {
    name: 'hourly',
    schedule: { cron: '0 * * * *', timezone: 'UTC' },
    allowance: { credits: 100, per: 'day', spread: 'even' },
    keys: { main: { allowance: { credits: 48, per: 'day', spread: 'even' } } },
  };
  const planned = (at: string) => (new Date(at).getUTCHours() >= 20 ? 5 : 4);

  it('schedules: a line per spread allowance, and each occurrence with its shares; --json too', async () => {
    using dir = workdir();
    const file = config(dir.dir, settings);
    const text = await cli(['schedules', file, '--count', '24'], { cwd: dir.dir });
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines.slice(1, 3)).toEqual([
      "  allowance: 100 credits a day (UTC), spread evenly: each occurrence's share below, as planned",
      `  key "main": 48 credits a day (UTC), spread evenly: each occurrence's share below, as planned`,
    ]);
    const occurrences = lines.slice(3);
    expect(occurrences).toHaveLength(24);
    for (const line of occurrences) {
      const at = /\((\S+Z)\)/.exec(line)?.[1] as string;
      expect(line).toMatch(new RegExp(`  share: ${planned(at)} credits a key, 2 credits for key "main"$`));
    }
    const [json] = (await cli(['schedules', file, '--count', '2', '--json'], { cwd: dir.dir })).stdout.trim().split('\n').map((line) => JSON.parse(line));
    const first = json.next[0];
    const hour = new Date(first.at).getUTCHours();
    expect(first.shares).toEqual([
      { key: null, period: first.at.slice(0, 10), share: planned(first.at), ofOccurrences: 24, occurrencesLeft: 24 - hour, exact: true },
      { key: 'main', period: first.at.slice(0, 10), share: 2, ofOccurrences: 24, occurrencesLeft: 24 - hour, exact: true },
    ]);
    // A pipeline that spreads nothing shows no share.
    const plain = JSON.parse((await cli(['schedules', config(dir.dir, { schedule: { cron: '0 6 * * *' } }), '--count', '1', '--json'], { cwd: dir.dir })).stdout);
    expect(plain.next[0]).toEqual({ at: expect.any(String), local: expect.any(String) });
  });

  it("estimate: the next occurrence's shares, with their periods' occurrences", async () => {
    using dir = workdir();
    const file = config(dir.dir, settings);
    const json = JSON.parse((await cli(['estimate', file, '--json'], { cwd: dir.dir })).stdout);
    const at: string = json.share.next.at;
    expect(json.share.shares.map((share: { key: string | null; share: number }) => [share.key, share.share])).toEqual([
      [null, planned(at)],
      ['main', 2],
    ]);
    // The text on its own (an hour may have turned between the two): the occurrence read back from its line, in UTC.
    const text = await cli(['estimate', file], { cwd: dir.dir });
    expect(text.code, text.stderr).toBe(0);
    const [, day, hour] = /share of the next occurrence \((\d{4}-\d\d-\d\d) (\d\d):00:00 \+00:00, as planned\)/.exec(text.stdout) ?? [];
    const next = `${day}T${hour}:00:00.000Z`;
    expect(text.stdout).toContain(`(${day} ${hour}:00:00 +00:00, as planned): ${planned(next)} credits a key (${day}: 24 occurrences), 2 credits for key "main" (${day}: 24 occurrences)\n`);
    const plain = await cli(['estimate', config(dir.dir)], { cwd: dir.dir });
    expect(plain.stdout).not.toContain('share');
  });
});
