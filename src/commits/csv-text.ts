import { stringify } from 'csv-stringify/sync';
import type { CsvFormat } from './page-writes.ts';

/**
 * The CSV text of records given as one flat array of cells, `width` to a record: a page's CSV is rendered through it
 * where it is appended (`appendToFile`: on the commit thread, or the run's), so its bytes are the same wherever that is.
 */
export function csvText(cells: readonly string[], width: number, format: CsvFormat): string {
  const records: string[][] = [];
  for (let at = 0; at < cells.length; at += width) records.push(cells.slice(at, at + width));
  return stringify(records, format);
}
