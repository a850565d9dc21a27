import type { KeySummary } from '../run/summary.ts';
import { escapeXml, formatNumber } from './svg.ts';

/**
 * The keys of a run that used a pool (docs/pipelines.md#a-pool-of-keys): each one's requests, credits, 429s, the rate
 * it ran at and the limit it learned, and when and why it was retired. Every cell escaped: a label is `[a-z0-9_-]` when
 * the run wrote it, but the database is a file anyone with access could have edited.
 */
export function keysTable(keys: readonly KeySummary[]): string {
  const rows = keys.map((key) => {
    const retired = key.retired ? `${key.retired.at.replace('T', ' ').slice(0, 19)}${key.retired.path === null ? '' : ` for ${key.retired.path}`}: ${key.retired.reason} (${key.retired.message})` : '–';
    const cells = [key.label, formatNumber(key.requests), formatNumber(key.credits), formatNumber(key.rateLimited), key.rate === null ? 'unpaced' : `${formatNumber(key.rate)} r/s`, key.learnedLimit === null ? '–' : `${formatNumber(key.learnedLimit)} r/s`, retired];
    return `<tr${key.retired ? ' class="retired"' : ''}>${cells.map((cell) => `<td>${escapeXml(cell)}</td>`).join('')}</tr>`;
  });
  return '<table><thead><tr><th>Key</th><th>Requests</th><th>Credits</th><th>429s</th><th>Rate</th><th>Learned limit</th><th>Retired</th></tr></thead>' + `<tbody>${rows.join('')}</tbody></table>`;
}
