import { stringify } from 'csv-stringify/sync';
import type { CsvFormat } from './page-writes.ts';

/**
 * The CSV text of records given as one flat array of cells, `width` to a record. The CSV sink and the commit thread
 * both render through it, so a page's bytes are the same wherever they are written.
 */
export function csvText(cells: readonly string[], width: number, format: CsvFormat): string {
  const records: string[][] = [];
  for (let at = 0; at < cells.length; at += width) records.push(cells.slice(at, at + width));
  return stringify(records, format);
}
