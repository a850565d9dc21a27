/** One formatter per zone: a spend row's day is taken for every request, and making a formatter costs far more than using one. */
const formatters = new Map<string, Intl.DateTimeFormat>();

/**
 * The day a request's spend falls on (docs/credits.md#where-the-credits-went): its date on the clocks of `timeZone`,
 * the zone of its key's allowance, else of UTC — `2026-11-27`, as PostgreSQL's `to_char(at AT TIME ZONE zone,
 * 'YYYY-MM-DD')` gives it, so that both stores write the same day. Null for a time that is no time (a row written by
 * hand), or a zone this runtime does not know.
 */
export function spendDay(at: string, timeZone: string | null | undefined): string | null {
  const instant = Date.parse(at);
  if (!Number.isFinite(instant)) return null;
  const zone = timeZone ?? 'UTC';
  let format = formatters.get(zone);
  if (format === undefined) {
    try {
      format = new Intl.DateTimeFormat('en-US', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit', calendar: 'gregory', numberingSystem: 'latn' });
    } catch {
      return null;
    }
    formatters.set(zone, format);
  }
  const parts = Object.fromEntries(format.formatToParts(instant).map((part) => [part.type, part.value]));
  return `${parts.year}-${parts.month}-${parts.day}`;
}
