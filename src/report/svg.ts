/**
 * Small SVG charts, drawn as strings: no library, no script, nothing fetched when the page is viewed. Every data mark
 * carries `data-mark` (bar, point, line, cell) and every chart `data-chart`, so that tests can count what was drawn.
 */

export function escapeXml(text: string): string {
  // String(): a guard for a caller that lets a number or a Buffer through, instead of a TypeError mid-page.
  return String(text).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);
}

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];

export function colour(index: number): string {
  return PALETTE[index % PALETTE.length] as string;
}

const round = (n: number) => Math.round(n * 10) / 10;

interface Frame {
  chart: string;
  title: string;
  width?: number;
  height?: number;
}

/** Charts are drawn at their natural size (in CSS pixels) and shrink, never grow, to fit the page. */
function svg(frame: Frame, body: string, width: number, height: number): string {
  return (
    `<svg data-chart="${escapeXml(frame.chart)}" role="img" aria-label="${escapeXml(frame.title)}" viewBox="0 0 ${width} ${height}" ` +
    `width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg"><title>${escapeXml(frame.title)}</title>${body}</svg>`
  );
}

/** Vertical bars with labels under them (credits per run, the distribution of ranks). */
export function columns(frame: Frame, data: readonly { label: string; value: number; note?: string }[]): string {
  const width = frame.width ?? 640;
  const height = frame.height ?? 240;
  const left = 48;
  const bottom = 40;
  const plotH = height - bottom - 16;
  const scale = valueTicks(Math.max(0, ...data.map((d) => d.value)), data.every((d) => Number.isInteger(d.value)));
  const max = scale.at(-1) as number;
  const slot = (width - left - 8) / Math.max(1, data.length);
  const bar = Math.max(2, Math.min(slot * 0.7, 56));
  const ticks = scale.map((v) => {
    const y = round(16 + plotH - (v / max) * plotH);
    return `<line x1="${left}" x2="${width - 8}" y1="${y}" y2="${y}" class="grid"/><text x="${left - 6}" y="${y + 4}" class="axis" text-anchor="end">${formatNumber(v)}</text>`;
  });
  const labelled = labelledSlots(data.map((d) => d.label), slot);
  const bars = data.map((d, i) => {
    const h = (d.value / max) * plotH;
    const x = round(left + i * slot + (slot - bar) / 2);
    const label = labelled(i) ? `<text x="${round(x + bar / 2)}" y="${height - bottom + 16}" class="axis" text-anchor="middle">${escapeXml(d.label)}</text>` : '';
    return (
      `<rect data-mark="bar" x="${x}" y="${round(16 + plotH - h)}" width="${round(bar)}" height="${round(h)}" fill="${colour(0)}">` +
      `<title>${escapeXml(`${d.label}: ${formatNumber(d.value)}${d.note ? ` (${d.note})` : ''}`)}</title></rect>${label}`
    );
  });
  return svg(frame, ticks.join('') + bars.join(''), width, height);
}

/** The axis labels' font size (`svg .axis` in the report's style). */
const AXIS_FONT_PX = 11;

/**
 * How wide an axis label is drawn, over-estimated: 0.65em a character, where digits, the widest characters of a run's
 * label (`11-22 09:30:00`), are 0.55–0.64em in the common sans-serif fonts.
 */
export function axisLabelWidth(text: string): number {
  return text.length * AXIS_FONT_PX * 0.65;
}

/**
 * Which of evenly spaced labels (centred `spacing` apart) are drawn: the last (the newest run) and every n-th before
 * it, n the fewest slots that hold the widest label and a gap, so that no two drawn labels overlap (seven runs' labels
 * were drawn 83 px apart, each about 90 px wide).
 */
export function labelledSlots(labels: readonly string[], spacing: number): (index: number) => boolean {
  const widest = Math.max(0, ...labels.map(axisLabelWidth));
  const every = Math.max(1, Math.ceil((widest + 8) / Math.max(1, spacing)));
  return (index) => (labels.length - 1 - index) % every === 0;
}

/**
 * A value axis from 0: steps of 1, 2 or 5 times a power of ten, about three of them, the last at or above `max`.
 * Whole steps when every value is whole: a count has no 13.5.
 */
export function valueTicks(max: number, whole: boolean): number[] {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const rough = max / 3;
  const power = 10 ** Math.floor(Math.log10(rough));
  const nice = [1, 2, 5, 10].map((m) => m * power).find((step) => step >= rough) ?? 10 * power;
  const step = whole ? Math.max(1, Math.ceil(nice)) : nice;
  const count = Math.ceil(max / step - 1e-9);
  // toPrecision: 3 × 0.1 is 0.30000000000000004.
  return Array.from({ length: count + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

/** Horizontal bars with their labels on the left (top domains). */
export function bars(frame: Frame, data: readonly { label: string; value: number; note?: string }[]): string {
  const width = frame.width ?? 640;
  const row = 22;
  const left = 220;
  const height = Math.max(40, data.length * row + 12);
  const max = Math.max(1, ...data.map((d) => d.value));
  const body = data.map((d, i) => {
    const y = 6 + i * row;
    const w = ((width - left - 60) * d.value) / max;
    return (
      `<text x="${left - 8}" y="${y + 15}" class="label" text-anchor="end">${escapeXml(clip(d.label, 34))}</text>` +
      `<rect data-mark="bar" x="${left}" y="${y + 3}" width="${round(w)}" height="${row - 6}" fill="${colour(0)}"><title>${escapeXml(`${d.label}: ${formatNumber(d.value)}${d.note ? ` (${d.note})` : ''}`)}</title></rect>` +
      `<text x="${round(left + w + 6)}" y="${y + 15}" class="axis">${formatNumber(d.value)}</text>`
    );
  });
  return svg(frame, body.join(''), width, height);
}

/**
 * Rank over runs, one line per result (rank 1 at the top). A result missing from a run breaks its line: a point
 * stands for each run it was seen in. A run the series did not complete (`incomplete`: why, per run) is shaded and
 * labelled: its results were not checked, which is not their being gone.
 */
export function rankLines(
  frame: Frame,
  runs: readonly string[],
  series: readonly { label: string; ranks: readonly (number | null)[] }[],
  incomplete: readonly (string | null)[] = [],
): string {
  const width = frame.width ?? 780;
  const height = frame.height ?? 260;
  const left = 60;
  const right = 260;
  const top = 14;
  const bottom = 34;
  const maxRank = Math.max(1, ...series.flatMap((s) => s.ranks.filter((r): r is number => r !== null)));
  const x = (i: number) => round(runs.length === 1 ? (left + width - right) / 2 : left + (i * (width - left - right)) / (runs.length - 1));
  const y = (rank: number) => round(top + ((rank - 1) / Math.max(1, maxRank - 1)) * (height - top - bottom));
  const grid = [1, Math.ceil(maxRank / 2), maxRank]
    .filter((v, i, a) => a.indexOf(v) === i)
    .map((r) => `<line x1="${left}" x2="${width - right}" y1="${y(r)}" y2="${y(r)}" class="grid"/><text x="${left - 6}" y="${y(r) + 4}" class="axis" text-anchor="end">#${r}</text>`);
  const labelled = labelledSlots(runs, runs.length > 1 ? (width - left - right) / (runs.length - 1) : width);
  const xLabels = runs.map((run, i) => (labelled(i) ? `<text x="${x(i)}" y="${height - 12}" class="axis" text-anchor="middle">${escapeXml(run)}</text>` : ''));
  // As wide as a run's share of the axis (at most 24 px), so that neighbouring runs' bands do not overlap.
  const band = Math.min(24, runs.length > 1 ? (width - left - right) / (runs.length - 1) : 24);
  const shaded = incomplete.map((reason, i) =>
    reason === null || i >= runs.length
      ? ''
      : `<rect data-mark="incomplete" x="${round(x(i) - band / 2)}" y="${top - 8}" width="${round(band)}" height="${height - top - bottom + 16}" class="incomplete">` +
        `<title>${escapeXml(`${runs[i]}: not complete (${reason}): its results were not checked`)}</title></rect>` +
        `<text x="${x(i)}" y="${top - 1}" class="axis" text-anchor="middle">${escapeXml(clip(reason, 12))}</text>`,
  );
  const lines = series.map((s, k) => {
    const segments: string[] = [];
    let current: string[] = [];
    s.ranks.forEach((rank, i) => {
      if (rank === null) {
        if (current.length > 1) segments.push(current.join(' '));
        current = [];
      } else current.push(`${current.length === 0 ? 'M' : 'L'}${x(i)},${y(rank)}`);
    });
    if (current.length > 1) segments.push(current.join(' '));
    const path = segments.length ? `<path data-mark="line" d="${segments.join(' ')}" fill="none" stroke="${colour(k)}" stroke-width="2"/>` : '';
    const points = s.ranks.map((rank, i) =>
      rank === null ? '' : `<circle data-mark="point" cx="${x(i)}" cy="${y(rank)}" r="3" fill="${colour(k)}"><title>${escapeXml(`${s.label}: #${rank} in ${runs[i]}`)}</title></circle>`,
    );
    const last = [...s.ranks].reverse().find((r) => r !== null) ?? 1;
    const legend = `<text x="${width - right + 8}" y="${y(last) + 4}" class="label" fill="${colour(k)}">${escapeXml(clip(s.label, 40))}</text>`;
    return path + points.join('') + legend;
  });
  return svg(frame, grid.join('') + shaded.join('') + xLabels.join('') + lines.join(''), width, height);
}

/** A square matrix of values in [0, 1] (country overlap), darker for more alike. */
export function heatmap(frame: Frame, labels: readonly string[], value: (a: string, b: string) => number | null): string {
  const cell = 42;
  const left = 48;
  const top = 30;
  const size = labels.length * cell;
  const head = labels.map(
    (l, i) =>
      `<text x="${left + i * cell + cell / 2}" y="${top - 10}" class="axis" text-anchor="middle">${escapeXml(l)}</text>` +
      `<text x="${left - 8}" y="${top + i * cell + cell / 2 + 4}" class="axis" text-anchor="end">${escapeXml(l)}</text>`,
  );
  const cells = labels.flatMap((a, i) =>
    labels.map((b, j) => {
      const v = value(a, b);
      const fill = v === null ? '#f3f4f6' : `rgba(37, 99, 235, ${round(0.08 + 0.92 * v)})`;
      const text = v === null ? '–' : v.toFixed(2);
      return (
        `<rect data-mark="cell" x="${left + j * cell}" y="${top + i * cell}" width="${cell - 2}" height="${cell - 2}" fill="${fill}"><title>${escapeXml(`${a} × ${b}: ${text}`)}</title></rect>` +
        `<text x="${left + j * cell + cell / 2 - 1}" y="${top + i * cell + cell / 2 + 3}" class="cell" text-anchor="middle" fill="${v !== null && v > 0.55 ? '#fff' : '#111'}">${text}</text>`
      );
    }),
  );
  return svg({ ...frame }, head.join('') + cells.join(''), left + size + 8, top + size + 8);
}

export function formatNumber(n: number): string {
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  return n.toLocaleString('en-US', { maximumFractionDigits: 2 });
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
