// The package's front door, as a user gets it: the built package imported by name, its root and each subpath.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './cli-helpers.ts';

/** The names a specifier exports at run time, imported from dist/ in a fresh Node (no source condition). */
function runtimeNames(specifier: string): string[] {
  const script = `const m = await import(${JSON.stringify(specifier)}); process.stdout.write(JSON.stringify(Object.keys(m).sort()))`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '--eval', script], { cwd: ROOT, encoding: 'utf8' })) as string[];
}

const SUBPATHS = {
  'webdata-etl/client': ['createClient', 'parseRetryAfter', 'parseSearchParams', 'clientOptionsSchema', 'RateLimitError'],
  'webdata-etl/scheduler': ['createScheduler', 'createCreditMeter', 'createPacer', 'estimate', 'virtualClock', 'readRateLimitHeaders'],
  'webdata-etl/simulator': ['startSimulator', 'DEFAULT_WEIGHTS'],
  'webdata-etl/analytics': ['exportReport', 'createResultsViews', 'REPORT_NAMES'],
  'webdata-etl/report': ['renderReport', 'writeReport'],
} as const;

describe('the package root and its subpaths, from the built package', () => {
  it('the root holds what a pipeline author uses, and nothing internal', () => {
    const names = runtimeNames('webdata-etl');
    expect(names).toEqual(
      [
        'AbortedError', 'AuthenticationError', 'BadRequestError', 'EXIT', 'HeapLimitError', 'LeaseHeldError', 'MalformedResponseError', 'NetworkError',
        'OutputError', 'PlanError', 'RateLimitError', 'RunAtWorkError', 'RunEndedError', 'RunLifecycleError', 'SeriesLostError', 'ServerError', 'StageContractError', 'TimeoutError',
        'UnexpectedStatusError', 'UnstorablePageError', 'UsageError', 'VERSION', 'ValidationError', 'WebDataError', 'WebDataEtlError', 'WorkerExpiredError', 'combineSources', 'createClient', 'dedupe', 'defineSink',
        'definePipeline', 'defineSource', 'paginators', 'endpointPages', 'filterItems', 'items', 'mapItems', 'missedNotificationSchema', 'normalize', 'notificationSchema', 'pipe', 'pipelineFromConfig', 'run',
        'runFromCommandLine', 'searchPages', 'stream', 'toCsv', 'toJsonl', 'toPostgres', 'toSqlite', 'verifyWebhookSignature', 'webhookBodySchema',
      ].sort(),
    );
    for (const internal of ['fullJitter', 'classify', 'viewName', 'OVERLAP_TOP', 'statePath', 'pageKey', 'createScheduler', 'startSimulator']) {
      expect(names).not.toContain(internal);
    }
  });

  for (const [specifier, expected] of Object.entries(SUBPATHS)) {
    it(`${specifier} imports by name, with its types in dist`, () => {
      expect(runtimeNames(specifier)).toEqual(expect.arrayContaining([...expected]));
      const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { types: string; default: string }> };
      const entry = manifest.exports[`./${specifier.split('/')[1]}`];
      expect(entry).toBeDefined();
      expect(existsSync(join(ROOT, entry?.types ?? ''))).toBe(true);
      expect(existsSync(join(ROOT, entry?.default ?? ''))).toBe(true);
    });
  }
});
