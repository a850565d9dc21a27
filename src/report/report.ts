import { basename } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../errors/validation-error.ts';
import { checkOutputPath, writeOutputFile } from '../output-file.ts';
import { isPostgresDatabase, openReader } from '../analytics/reader.ts';
import { RUN_STATUSES } from '../run/summary.ts';
import { VERSION } from '../version.ts';
import { OVERLAP_TOP, RANK_BANDS, type ReportData, readReportData, shortRun } from './data.ts';
import { keysTable } from './keys.ts';
import { trackedTable } from './tracked.ts';
import { keySpendSection } from './spend-panel.ts';
import { bars, columns, escapeXml, formatNumber, heatmap, rankLines } from './svg.ts';

export const reportOptionsSchema = z.strictObject({
  /** A pipeline's output: its SQLite file, or a PostgreSQL database (`postgres://…`, or `postgres:`). */
  database: z.string().min(1),
  /** PostgreSQL: the schema of the results table (default `public`) and of the run state (default `webdata`). */
  schema: z.string().optional(),
  stateSchema: z.string().optional(),
  query: z.string().optional(),
  country: z.string().trim().toLowerCase().optional(),
  table: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, { error: 'must be a table name' }).default('results'),
  maxQueries: z.int().positive().default(3),
  maxLines: z.int().positive().default(6),
  maxRuns: z.int().positive().default(50),
  /** When the report was made (for reproducible output in tests). */
  now: z.date().optional(),
});

export type ReportOptions = z.input<typeof reportOptionsSchema>;

/**
 * One self-contained HTML page (inline CSS and SVG, no script, nothing fetched when it is viewed): the run summary,
 * credits per run, the distribution of ranks, top domains, rank histories and country overlap. Readable on a laptop,
 * printable, and with a clear empty state.
 */
export async function renderReport(options: ReportOptions): Promise<string> {
  const config = ValidationError.parse(reportOptionsSchema, options, 'Invalid report');
  const reader = await openReader(config.database, config);
  let data: ReportData;
  try {
    data = await readReportData(reader, config);
  } finally {
    await reader.close();
  }
  return page(data, config);
}

/**
 * Writes the page to `out` whole or not at all (see output-file.ts), created 0600. An `out` that is the database being
 * read, or one of its -wal, -shm or -journal files, is refused before anything is read or written.
 */
export async function writeReport(options: ReportOptions & { out: string }): Promise<{ bytes: number }> {
  const { out, ...rest } = options;
  ValidationError.parse(z.string().min(1, { error: 'must be a file name' }), out, 'Invalid report', 'out');
  checkOutputPath(out, { databases: isPostgresDatabase(rest.database) ? [] : [rest.database] });
  const html = await renderReport(rest);
  writeOutputFile(out, html);
  return { bytes: Buffer.byteLength(html) };
}

function page(data: ReportData, config: z.output<typeof reportOptionsSchema>): string {
  const made = (config.now ?? new Date()).toISOString().replace('T', ' ').slice(0, 16);
  const scope = [config.query && `query “${config.query}”`, config.country && `country ${config.country}`].filter(Boolean).join(', ');
  const sections: string[] = [];
  const latest = data.runs.at(-1);

  sections.push(section('Runs', summary(data)));
  const pooled = data.runs.findLast((run) => run.keys !== undefined && run.keys.length > 0);
  if (pooled?.keys) {
    sections.push(section(`Keys of run ${pooled.runId}`, keysTable(pooled.keys), 'Each key of the pool of the latest run that had one: its requests, credits and 429s across the run, the rate it ran at and the limit it learned by the end, and when and why a key was retired.'));
  }
  if (data.runs.length > 0) {
    sections.push(
      section(
        'Credits per run',
        columns(
          { chart: 'credits', title: 'Credits spent per run' },
          data.runs.map((run) => ({ label: shortRun(run.runId), value: run.credits, note: `${run.status}${run.uncertain ? `, ${formatNumber(run.uncertain)} uncertain` : ''}` })),
        ),
        `Credits counted against the budget by each run (uncertain ones included), oldest to newest${data.runs.length >= config.maxRuns ? `; the latest ${config.maxRuns}` : ''}.`,
      ),
    );
  }
  if (data.keySpend) sections.push(section('Credits per day per key', keySpendSection(data.keySpend), SPEND_NOTE));
  if (data.rowCount === 0) {
    sections.push(
      `<section class="empty"><h2>No results yet</h2><p>${escapeXml(data.database)} holds no rows${scope ? ` for ${escapeXml(scope)}` : ''}. ` +
        'Run a pipeline first — <code>npm start</code> runs the rank-tracking example on the built-in simulator — then make the report again.</p></section>',
    );
  } else {
    if (data.rankBuckets.length > 0) {
      sections.push(
        section(
          'Distribution of ranks',
          columns({ chart: 'ranks', title: 'Results of the latest rankings by rank band', height: 200 }, data.rankBuckets),
          'How many results of the latest run of each query and country sit in each rank band.',
        ),
      );
    }
    if (data.tracked.length > 0) {
      sections.push(section('Tracked domains', trackedTable(data.tracked), 'Each tracked domain’s best rank in the latest run that fetched its query, country and language, or how deep that run looked without finding it, and how many runs ago that was (a run’s refresh plan may skip a series whose ranks rarely move).'));
    }
    if (data.domains.length > 0) {
      sections.push(section('Top domains', bars({ chart: 'domains', title: 'Domains with the most results in the latest rankings' }, data.domains), 'Results per domain in the latest rankings, with its best rank.'));
    }
    for (const h of data.histories) {
      const title = `Rank history: “${h.query}” in ${h.country || 'no country'}${h.lang ? ` (${h.lang})` : ''}`;
      const incomplete = h.incomplete.some((reason) => reason !== null);
      const note =
        h.runs.length === 1
          ? 'One run so far: each point is a result’s rank; lines appear as runs accumulate.'
          : `The best results of the latest complete run, and their rank in every run (a gap: not seen that run${incomplete ? '; a shaded run: this query did not complete in it — it failed, ran out of budget or was stopped — so its results were not checked' : ''}${h.skipped.some(Boolean) ? '; a run with no points for any: its refresh plan skipped this query, whose last ranks stand' : ''}).`;
      sections.push(
        section(
          title,
          h.series.length > 0 ? rankLines({ chart: 'history', title }, h.runs, h.series, h.incomplete) : '<p class="note">No results with a URL to follow.</p>',
          note,
        ),
      );
    }
    if (data.overlaps.length > 0) {
      const maps = data.overlaps.map((o) => {
        const title = `Country overlap: “${o.query}”`;
        const map = heatmap({ chart: 'overlap', title }, o.countries, (a, b) => (a === b ? 1 : (o.pairs.get(a < b ? `${a}|${b}` : `${b}|${a}`) ?? null)));
        return `<figure><figcaption>${escapeXml(o.query)}${o.lang ? ` (${escapeXml(o.lang)})` : ''}</figcaption>${map}</figure>`;
      });
      sections.push(
        section('Country overlap', `<div class="pair">${maps.join('')}</div>`, `Jaccard similarity of the top ${OVERLAP_TOP} URLs of each pair of countries, per query (1: the same set).`),
      );
    }
    if (data.histories.length === 0 && data.rankBuckets.length === 0) {
      sections.push('<section class="empty"><p>This output has no analytics views (a dedupe wider than the series, or custom columns): see docs/analytics.md, “Where the views apply”.</p></section>');
    }
  }

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeXml(`webdata-etl report — ${basename(data.database)}`)}</title>
<style>${CSS}</style></head>
<body><header><h1>${escapeXml(latest?.pipeline ?? basename(data.database))}</h1>
<p class="meta">${escapeXml(basename(data.database))}${scope ? ` · ${escapeXml(scope)}` : ''} · ${data.runs.length} run(s) · ${formatNumber(data.rowCount)} rows · made ${escapeXml(made)} UTC by webdata-etl ${escapeXml(VERSION)}</p></header>
<main>${sections.join('\n')}</main></body></html>
`;
}

const SPEND_NOTE =
  'Where the credits went: each key’s credits per day over the month up to the latest day with spend, every pipeline of the state database together (days on the clocks of the key’s allowance, else UTC). The dashed line is the key’s allowance: a day’s bars stand against a daily one; against a monthly one, the line of the month’s running total.';

function section(title: string, body: string, note?: string): string {
  return `<section><h2>${escapeXml(title)}</h2>${note ? `<p class="note">${escapeXml(note)}</p>` : ''}<div class="chart">${body}</div></section>`;
}

/** A number for a table cell or card: '–' where there is none (not recorded, or not a number in a tampered file). */
function count(n: number | undefined): string {
  return n === undefined ? '–' : formatNumber(n);
}

/** A run's status as a class name: only the statuses the stylesheet knows, so that the data never writes markup. */
function statusClass(status: string): string {
  return (RUN_STATUSES as readonly string[]).includes(status) ? status : 'unknown';
}

function summary(data: ReportData): string {
  if (data.runs.length === 0) return '<p class="note">No runs are recorded in this file.</p>';
  const latest = data.runs.at(-1) as ReportData['runs'][number];
  const cards = [
    ['Latest run', shortRun(latest.runId)],
    ['Status', latest.reason ? `${latest.status} (${latest.reason})` : latest.status],
    ['Rows written', count(latest.rows)],
    ['Requests', count(latest.requests)],
    ['Credits', formatNumber(latest.credits)],
    ['Runs', formatNumber(data.runs.length)],
  ];
  const recent = data.runs.slice(-8).reverse();
  // Every cell is escaped, numbers included: they are formatted as text first.
  const cells = (run: ReportData['runs'][number]) => [
    run.runId,
    run.reason ? `${run.status} (${run.reason})` : run.status,
    run.durationMs === undefined ? '–' : `${(run.durationMs / 1000).toFixed(1)} s`,
    count(run.requests),
    count(run.rows),
    `${formatNumber(run.credits)}${run.uncertain ? ` (${formatNumber(run.uncertain)} uncertain)` : ''}`,
  ];
  const table =
    `<table><thead><tr><th>Run</th><th>Status</th><th>Duration</th><th>Requests</th><th>Rows</th><th>Credits</th></tr></thead><tbody>` +
    recent
      .map((run) => {
        const [id, status, ...rest] = cells(run).map(escapeXml);
        return `<tr><td>${id}</td><td class="status ${statusClass(run.status)}">${status}</td>${rest.map((cell) => `<td>${cell}</td>`).join('')}</tr>`;
      })
      .join('') +
    `</tbody></table>${data.runs.length > recent.length ? `<p class="note">The latest ${recent.length} of ${data.runs.length} runs.</p>` : ''}`;
  return `<div class="cards">${cards.map(([k, v]) => `<div class="card"><span>${escapeXml(k as string)}</span><strong>${escapeXml(v as string)}</strong></div>`).join('')}</div>${table}`;
}

const CSS = `
:root { color-scheme: light; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827; }
body { margin: 0; background: #f9fafb; }
header, main { max-width: 1040px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 24px; } h1 { margin: 0 0 4px; font-size: 26px; } .meta { color: #4b5563; margin: 0 0 16px; }
section { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 16px 20px; margin: 0 0 16px; break-inside: avoid; }
h2 { font-size: 17px; margin: 0 0 6px; } .note { color: #6b7280; font-size: 13px; margin: 0 0 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); gap: 10px; margin-bottom: 12px; }
.card { background: #f3f4f6; border-radius: 6px; padding: 8px 12px; } .card span { display: block; font-size: 12px; color: #6b7280; }
.card strong { font-size: 18px; }
table { width: 100%; border-collapse: collapse; font-size: 13px; } th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e5e7eb; }
tr.retired td { color: #b91c1c; } td.status.completed, td.status.budget, td.status.allowance { color: #15803d; } td.status.stopped, td.status.failed_series, td.status.interrupted { color: #b91c1c; }
svg { max-width: 100%; height: auto; display: block; } figure { margin: 0; } figcaption { font-size: 13px; font-weight: 600; margin-bottom: 4px; } .pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 16px; } svg .grid { stroke: #e5e7eb; } svg .axis { font-size: 11px; fill: #4b5563; }
svg .label { font-size: 12px; fill: #111827; } svg .cell { font-size: 10px; } svg .incomplete { fill: #fef3c7; }
.empty { text-align: center; padding: 32px; } code { background: #f3f4f6; padding: 1px 4px; border-radius: 3px; }
@media print { body { background: #fff; } section { border: none; padding: 8px 0; } header, main { max-width: none; } }
`;

export { RANK_BANDS };
