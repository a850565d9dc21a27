import type { KeySpendSeries } from './key-spend.ts';
import { colour, escapeXml, formatNumber, labelledSlots, valueTicks } from './svg.ts';

const round = (n: number) => Math.round(n * 10) / 10;

/**
 * A month's running total, day by day: what the allowance of a month is spent against (it starts again on the 1st).
 * The days are `2026-11-27`: a new month where the first seven characters change.
 */
export function monthToDate(days: readonly string[], credits: readonly number[]): number[] {
  let total = 0;
  return days.map((day, i) => {
    if (i > 0 && day.slice(0, 7) !== (days[i - 1] as string).slice(0, 7)) total = 0;
    total += credits[i] ?? 0;
    return total;
  });
}

/**
 * One key's credits per day (bars), and its allowance as a line (docs/analytics.md#the-report): a daily allowance is a
 * horizontal line the bars are measured against; a monthly one too, with the month's running total (`monthToDate`) as
 * a line that climbs towards it and starts again on the 1st. Marks: `bar`, `allowance`, `cumulative` (as svg.ts's).
 */
export function keySpendChart(frame: { chart: string; title: string }, days: readonly string[], key: KeySpendSeries, index: number): string {
  const width = 640;
  const height = 200;
  const left = 48;
  const bottom = 34;
  const top = 14;
  const plotH = height - bottom - top;
  const running = key.allowance?.per === 'month' ? monthToDate(days, key.credits) : undefined;
  const highest = Math.max(0, ...key.credits, ...(running ?? []), key.allowance?.credits ?? 0);
  const scale = valueTicks(highest, [...key.credits, ...(running ?? [])].every(Number.isInteger) && Number.isInteger(key.allowance?.credits ?? 0));
  const max = scale.at(-1) as number;
  const y = (value: number) => round(top + plotH - (value / max) * plotH);
  const slot = (width - left - 8) / Math.max(1, days.length);
  const bar = Math.max(2, Math.min(slot * 0.7, 24));
  const x = (i: number) => round(left + i * slot + slot / 2);
  const ticks = scale.map((v) => `<line x1="${left}" x2="${width - 8}" y1="${y(v)}" y2="${y(v)}" class="grid"/><text x="${left - 6}" y="${y(v) + 4}" class="axis" text-anchor="end">${formatNumber(v)}</text>`);
  const shortDays = days.map((day) => day.slice(5));
  const labelled = labelledSlots(shortDays, slot);
  const fill = colour(index);
  const bars = days.map((day, i) => {
    const value = key.credits[i] ?? 0;
    const label = labelled(i) ? `<text x="${x(i)}" y="${height - bottom + 16}" class="axis" text-anchor="middle">${escapeXml(shortDays[i] as string)}</text>` : '';
    return (
      `<rect data-mark="bar" x="${round(x(i) - bar / 2)}" y="${y(value)}" width="${round(bar)}" height="${round(top + plotH - y(value))}" fill="${fill}">` +
      `<title>${escapeXml(`${key.label}, ${day}: ${formatNumber(value)} credits${running ? ` (${formatNumber(running[i] ?? 0)} this month)` : ''}`)}</title></rect>${label}`
    );
  });
  // A month's line ends with it: the next starts again from its first day, not from the last one's total.
  const newMonth = (i: number) => i === 0 || (days[i] as string).slice(0, 7) !== (days[i - 1] as string).slice(0, 7);
  const path = running?.map((value, i) => `${newMonth(i) ? 'M' : 'L'}${x(i)},${y(value)}`).join(' ');
  const line = path ? `<path data-mark="cumulative" d="${path}" fill="none" stroke="#111827" stroke-width="1.5"><title>${escapeXml(`${key.label}: credits this month, day by day`)}</title></path>` : '';
  const allowance = key.allowance
    ? `<line data-mark="allowance" x1="${left}" x2="${width - 8}" y1="${y(key.allowance.credits)}" y2="${y(key.allowance.credits)}" stroke="#b91c1c" stroke-width="1.5" stroke-dasharray="6 4">` +
      `<title>${escapeXml(`${key.label}: allowance of ${formatNumber(key.allowance.credits)} credits a ${key.allowance.per} (${key.allowance.timezone})`)}</title></line>`
    : '';
  return (
    `<svg data-chart="${escapeXml(frame.chart)}" role="img" aria-label="${escapeXml(frame.title)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg">` +
    `<title>${escapeXml(frame.title)}</title>${ticks.join('')}${bars.join('')}${line}${allowance}</svg>`
  );
}
