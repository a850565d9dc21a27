// webdata-etl/analytics: the views over a results table, and exports of them.
export { exportReport, exportOptionsSchema, type ExportOptions, REPORTS, REPORT_NAMES } from './export.ts';
export { createResultsViews, createSpendView, applicableViews, viewName } from './views.ts';
export type { ResultsView } from './statements.ts';
