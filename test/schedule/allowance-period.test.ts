// An allowance's periods (src/schedule/allowance-period.ts): days and months in a time zone, from instants given as a
// virtual clock would give them: midnights, month ends, both DST transitions, zones off the hour, and zones whose
// clocks skip midnight itself.
import { describe, expect, it } from 'vitest';
import { type AllowancePer, isTimeZone, periodAt } from '../../src/schedule/allowance-period.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();
/** The period as ISO instants, and its length in hours. */
function period(instant: string, per: AllowancePer, zone: string) {
  const found = periodAt(at(instant), per, zone);
  return { key: found.key, start: iso(found.start), end: iso(found.end), hours: (found.end - found.start) / 3_600_000 };
}

describe('a day of an allowance', () => {
  it('runs from midnight to midnight in its zone: UTC, Europe/Berlin, Asia/Tokyo, America/Los_Angeles', () => {
    expect(period('2026-11-27T13:45:00.000Z', 'day', 'UTC')).toEqual({ key: '2026-11-27', start: '2026-11-27T00:00:00.000Z', end: '2026-11-28T00:00:00.000Z', hours: 24 });
    // 23:59:59.999 in Berlin is still the 27th; a millisecond later it is the 28th.
    expect(period('2026-11-27T22:59:59.999Z', 'day', 'Europe/Berlin')).toEqual({ key: '2026-11-27', start: '2026-11-26T23:00:00.000Z', end: '2026-11-27T23:00:00.000Z', hours: 24 });
    expect(period('2026-11-27T23:00:00.000Z', 'day', 'Europe/Berlin').key).toBe('2026-11-28');
    expect(period('2026-11-27T15:00:00.000Z', 'day', 'Asia/Tokyo')).toEqual({ key: '2026-11-28', start: '2026-11-27T15:00:00.000Z', end: '2026-11-28T15:00:00.000Z', hours: 24 });
    expect(period('2026-11-27T07:59:59.000Z', 'day', 'America/Los_Angeles')).toEqual({ key: '2026-11-26', start: '2026-11-26T08:00:00.000Z', end: '2026-11-27T08:00:00.000Z', hours: 24 });
  });

  it('in a zone off the hour: Asia/Kolkata (+05:30) and Asia/Kathmandu (+05:45)', () => {
    expect(period('2026-11-26T18:30:00.000Z', 'day', 'Asia/Kolkata')).toEqual({ key: '2026-11-27', start: '2026-11-26T18:30:00.000Z', end: '2026-11-27T18:30:00.000Z', hours: 24 });
    expect(period('2026-11-26T18:29:59.999Z', 'day', 'Asia/Kolkata').key).toBe('2026-11-26');
    expect(period('2026-11-26T18:15:00.000Z', 'day', 'Asia/Kathmandu')).toEqual({ key: '2026-11-27', start: '2026-11-26T18:15:00.000Z', end: '2026-11-27T18:15:00.000Z', hours: 24 });
    expect(period('2026-11-26T18:14:59.999Z', 'day', 'Asia/Kathmandu').key).toBe('2026-11-26');
  });

  it('lasts 23 hours the day clocks go forward and 25 the day they go back: Europe/Berlin and America/New_York', () => {
    expect(period('2026-03-29T12:00:00.000Z', 'day', 'Europe/Berlin')).toEqual({ key: '2026-03-29', start: '2026-03-28T23:00:00.000Z', end: '2026-03-29T22:00:00.000Z', hours: 23 });
    expect(period('2026-10-25T12:00:00.000Z', 'day', 'Europe/Berlin')).toEqual({ key: '2026-10-25', start: '2026-10-24T22:00:00.000Z', end: '2026-10-25T23:00:00.000Z', hours: 25 });
    // The hour between 02:00 and 03:00 that Berlin lives twice is one day's.
    expect(period('2026-10-25T00:30:00.000Z', 'day', 'Europe/Berlin').key).toBe('2026-10-25');
    expect(period('2026-10-25T01:30:00.000Z', 'day', 'Europe/Berlin').key).toBe('2026-10-25');
    expect(period('2026-03-08T12:00:00.000Z', 'day', 'America/New_York')).toEqual({ key: '2026-03-08', start: '2026-03-08T05:00:00.000Z', end: '2026-03-09T04:00:00.000Z', hours: 23 });
    expect(period('2026-11-01T12:00:00.000Z', 'day', 'America/New_York')).toEqual({ key: '2026-11-01', start: '2026-11-01T04:00:00.000Z', end: '2026-11-02T05:00:00.000Z', hours: 25 });
  });

  it('begins at the first instant of its date where the clocks skip midnight: America/Santiago and Asia/Beirut', () => {
    // Santiago, 2024-09-08: 24:00 of the 7th is 01:00 of the 8th, at 04:00 UTC.
    expect(period('2024-09-08T12:00:00.000Z', 'day', 'America/Santiago')).toEqual({ key: '2024-09-08', start: '2024-09-08T04:00:00.000Z', end: '2024-09-09T03:00:00.000Z', hours: 23 });
    expect(period('2024-09-08T03:59:59.999Z', 'day', 'America/Santiago')).toEqual({ key: '2024-09-07', start: '2024-09-07T04:00:00.000Z', end: '2024-09-08T04:00:00.000Z', hours: 24 });
    // And back, 2024-04-07: 24:00 of the 6th is 23:00 of the 6th again: the 6th lasts 25 hours.
    expect(period('2024-04-06T12:00:00.000Z', 'day', 'America/Santiago')).toEqual({ key: '2024-04-06', start: '2024-04-06T03:00:00.000Z', end: '2024-04-07T04:00:00.000Z', hours: 25 });
    // Beirut, 2024-03-31: 00:00 is 01:00.
    expect(period('2024-03-31T12:00:00.000Z', 'day', 'Asia/Beirut')).toEqual({ key: '2024-03-31', start: '2024-03-30T22:00:00.000Z', end: '2024-03-31T21:00:00.000Z', hours: 23 });
    expect(period('2024-10-26T12:00:00.000Z', 'day', 'Asia/Beirut')).toEqual({ key: '2024-10-26', start: '2024-10-25T21:00:00.000Z', end: '2024-10-26T22:00:00.000Z', hours: 25 });
  });
});

describe('a month of an allowance', () => {
  it('runs from the first to the first: January 31 to February, a leap February, December to January', () => {
    expect(period('2026-01-31T23:59:59.999Z', 'month', 'UTC')).toEqual({ key: '2026-01', start: '2026-01-01T00:00:00.000Z', end: '2026-02-01T00:00:00.000Z', hours: 31 * 24 });
    expect(period('2026-01-31T23:59:59.999Z', 'day', 'UTC').end).toBe('2026-02-01T00:00:00.000Z');
    expect(period('2026-02-01T00:00:00.000Z', 'month', 'UTC').key).toBe('2026-02');
    expect(period('2028-02-29T12:00:00.000Z', 'day', 'UTC')).toEqual({ key: '2028-02-29', start: '2028-02-29T00:00:00.000Z', end: '2028-03-01T00:00:00.000Z', hours: 24 });
    expect(period('2028-02-29T12:00:00.000Z', 'month', 'UTC')).toEqual({ key: '2028-02', start: '2028-02-01T00:00:00.000Z', end: '2028-03-01T00:00:00.000Z', hours: 29 * 24 });
    expect(period('2026-02-14T12:00:00.000Z', 'month', 'UTC').hours).toBe(28 * 24);
    expect(period('2026-12-31T12:00:00.000Z', 'month', 'UTC')).toEqual({ key: '2026-12', start: '2026-12-01T00:00:00.000Z', end: '2027-01-01T00:00:00.000Z', hours: 31 * 24 });
    expect(period('2026-12-31T12:00:00.000Z', 'day', 'UTC').end).toBe('2027-01-01T00:00:00.000Z');
  });

  it('in its zone, DST included: December in Berlin; March in Berlin, an hour short; a month in Kathmandu', () => {
    expect(period('2026-12-31T22:59:59.999Z', 'month', 'Europe/Berlin')).toEqual({ key: '2026-12', start: '2026-11-30T23:00:00.000Z', end: '2026-12-31T23:00:00.000Z', hours: 31 * 24 });
    expect(period('2026-12-31T23:00:00.000Z', 'month', 'Europe/Berlin').key).toBe('2027-01');
    expect(period('2026-03-15T12:00:00.000Z', 'month', 'Europe/Berlin')).toEqual({ key: '2026-03', start: '2026-02-28T23:00:00.000Z', end: '2026-03-31T22:00:00.000Z', hours: 31 * 24 - 1 });
    expect(period('2026-11-30T18:14:59.999Z', 'month', 'Asia/Kathmandu')).toEqual({ key: '2026-11', start: '2026-10-31T18:15:00.000Z', end: '2026-11-30T18:15:00.000Z', hours: 30 * 24 });
  });
});

describe('periods walked by a virtual clock', () => {
  it('follow each other without a gap or an overlap, each holding the instants it says, over two years in every zone tried', () => {
    const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'America/Santiago', 'Asia/Beirut', 'Asia/Kolkata', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'Pacific/Chatham'];
    for (const zone of zones) {
      for (const per of ['day', 'month'] as const) {
        let clock = at('2024-01-01T00:00:00.000Z');
        let current = periodAt(clock, per, zone);
        const keys = new Set<string>();
        while (clock < at('2026-01-01T00:00:00.000Z')) {
          // Steps of 7 hours land on every hour of the day in turn; each crossing is checked at its very instant too.
          clock += 7 * 3_600_000;
          const found = periodAt(clock, per, zone);
          expect(found.start, `${zone} ${per} at ${iso(clock)}`).toBeLessThanOrEqual(clock);
          expect(found.end, `${zone} ${per} at ${iso(clock)}`).toBeGreaterThan(clock);
          if (found.key !== current.key) {
            expect(found.start, `${zone} ${per}: ${current.key} → ${found.key}`).toBe(current.end);
            expect(periodAt(current.end - 1, per, zone).key).toBe(current.key);
            expect(periodAt(current.end, per, zone).key).toBe(found.key);
            expect(keys.has(found.key), `${zone} ${per}: ${found.key} twice`).toBe(false);
            keys.add(current.key);
            current = found;
          }
        }
        // 731 days and 24 months from 2024-01-01 UTC, one more in a zone whose walk began the day (month) before.
        expect(keys.size).toBeGreaterThanOrEqual(per === 'day' ? 730 : 24);
        expect(keys.size).toBeLessThanOrEqual(per === 'day' ? 732 : 25);
      }
    }
  });
});

describe('a time zone', () => {
  it('is one Intl knows', () => {
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Asia/Kathmandu')).toBe(true);
    expect(isTimeZone('Mars/Olympus_Mons')).toBe(false);
    expect(isTimeZone('')).toBe(false);
  });
});
