import type { KeySpend } from './key-spend.ts';
import { keySpendChart } from './spend-chart.ts';
import { escapeXml, formatNumber } from './svg.ts';

/**
 * The report's panel of where the credits went (docs/analytics.md#the-report): a chart per key, its label and allowance
 * above it, then the credits of those days by pipeline and key. Every string escaped: labels and pipeline names come
 * from the database, which anyone with access to it could have edited.
 */
export function keySpendSection(spend: KeySpend): string {
  const charts = spend.keys.map((key, i) => {
    const allowance = key.allowance ? ` — allowance ${formatNumber(key.allowance.credits)} credits a ${key.allowance.per} (${key.allowance.timezone})` : ' — no allowance';
    const title = `Credits per day: ${key.label}`;
    return `<figure><figcaption>${escapeXml(`${key.label}${allowance}`)}</figcaption>${keySpendChart({ chart: 'key-spend', title }, spend.days, key, i)}</figure>`;
  });
  const rows = spend.pipelines.map((line) => `<tr><td>${escapeXml(line.pipeline)}</td><td>${escapeXml(line.key)}</td><td>${escapeXml(formatNumber(line.credits))}</td></tr>`);
  const table = `<table><thead><tr><th>Pipeline</th><th>Key</th><th>Credits (${spend.days.length} days)</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
  return `${charts.join('')}${table}`;
}
