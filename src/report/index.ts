// webdata-etl/report: the self-contained HTML report.
export { renderReport, writeReport, reportOptionsSchema, type ReportOptions } from './report.ts';
