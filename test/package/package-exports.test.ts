// The package's front door, as a user gets it: the built package imported by name, its root and each subpath.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../cli-helpers.ts';

/** What a script prints, run in a fresh Node from the repository (no source condition: imports by name reach dist/). */
function inNode<T>(script: string): T {
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '--eval', script], { cwd: ROOT, encoding: 'utf8' })) as T;
}

/** The names a specifier exports at run time, imported from dist/. */
function runtimeNames(specifier: string): string[] {
  return inNode<string[]>(`const m = await import(${JSON.stringify(specifier)}); process.stdout.write(JSON.stringify(Object.keys(m).sort()))`);
}

/**
 * The root's values, every one: what a pipeline author writes with. A name added to src/index.ts fails this test until
 * it is added here, on purpose: the root stays at most 30 values (docs/development.md#what-the-package-exports), and
 * what a pipeline author rarely writes goes to a subpath.
 */
const ROOT_NAMES = [
  // a pipeline and its run
  'definePipeline', 'run', 'stream', 'runFromCommandLine', 'pipelineFromConfig', 'EXIT', 'VERSION',
  // sources
  'searchPages', 'endpointPages', 'combineSources', 'defineSource', 'paginators',
  // stages
  'normalize', 'dedupe', 'mapItems', 'filterItems', 'items',
  // sinks
  'toSqlite', 'toPostgres', 'toCsv', 'toJsonl', 'defineSink',
  // the errors a caller of run() or stream() acts on (every class: webdata-etl/errors)
  'WebDataEtlError', 'ValidationError', 'RunLifecycleError', 'LeaseHeldError', 'OutputError', 'HeapLimitError',
];

/** Every subpath of package.json's `exports`, with names it must export (each listed under one door only: below). */
const SUBPATHS: Record<string, readonly string[]> = {
  'webdata-etl/errors': ['WebDataEtlError', 'WebDataError', 'RateLimitError', 'AuthenticationError', 'ValidationError', 'UsageError', 'StageContractError', 'LeaseHeldError', 'WorkerExpiredError'],
  'webdata-etl/client': ['createClient', 'parseRetryAfter', 'parseSearchParams', 'clientOptionsSchema', 'SEARCH_PATH'],
  'webdata-etl/notifications': ['notificationSchema', 'missedNotificationSchema', 'webhookBodySchema', 'verifyWebhookSignature'],
  'webdata-etl/scheduler': ['createScheduler', 'createCreditMeter', 'createPacer', 'estimate', 'virtualClock', 'readRateLimitHeaders'],
  'webdata-etl/simulator': ['startSimulator', 'DEFAULT_WEIGHTS'],
  'webdata-etl/analytics': ['exportReport', 'createResultsViews', 'REPORT_NAMES'],
  'webdata-etl/report': ['renderReport', 'writeReport'],
};

type Entry = Record<'webdata-etl:source' | 'types' | 'default', string>;
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, Entry | string> };

describe('the package root and its subpaths, from the built package', () => {
  it('the root holds what a pipeline author writes with: these values and no other (at most 30)', () => {
    const names = runtimeNames('webdata-etl');
    expect(names).toEqual([...ROOT_NAMES].sort());
    expect(names.length).toBeLessThanOrEqual(30);
    for (const elsewhere of ['createClient', 'verifyWebhookSignature', 'notificationSchema', 'RateLimitError', 'WebDataError', 'pipe', 'fullJitter', 'classify', 'viewName', 'OVERLAP_TOP', 'statePath', 'pageKey', 'createScheduler', 'startSimulator']) {
      expect(names).not.toContain(elsewhere);
    }
  });

  it('package.json exports the root and these subpaths, each with the same three conditions', () => {
    expect(Object.keys(manifest.exports).sort()).toEqual(['.', './package.json', ...Object.keys(SUBPATHS).map((specifier) => `./${specifier.split('/')[1]}`)].sort());
    for (const [key, entry] of Object.entries(manifest.exports)) {
      if (key === './package.json') continue;
      expect(Object.keys(entry), key).toEqual(['webdata-etl:source', 'types', 'default']);
    }
  });

  for (const [specifier, expected] of Object.entries(SUBPATHS)) {
    it(`${specifier} imports by name, with its types in dist`, () => {
      expect(runtimeNames(specifier)).toEqual(expect.arrayContaining([...expected]));
      const entry = manifest.exports[`./${specifier.split('/')[1]}`] as Entry | undefined;
      expect(entry).toBeDefined();
      for (const file of [entry?.['webdata-etl:source'], entry?.types, entry?.default]) expect(existsSync(join(ROOT, file ?? '')), file).toBe(true);
    });
  }

  it('each value has one door: the root shares only its six errors with webdata-etl/errors, and they are the same classes', () => {
    const doors = ['webdata-etl', ...Object.keys(SUBPATHS)];
    const found = inNode<{ shared: [string, string, string[]][]; same: boolean[]; errors: string[] }>(`
      const doors = ${JSON.stringify(doors)};
      const modules = await Promise.all(doors.map((door) => import(door)));
      const shared = [];
      for (let a = 0; a < doors.length; a++) for (let b = a + 1; b < doors.length; b++) {
        const both = Object.keys(modules[a]).filter((name) => name in modules[b]).sort();
        if (both.length > 0) shared.push([doors[a], doors[b], both]);
      }
      const [root, errors] = [modules[0], modules[doors.indexOf('webdata-etl/errors')]];
      const same = Object.keys(errors).filter((name) => name in root).map((name) => root[name] === errors[name]);
      const isError = (value) => typeof value === 'function' && (value === errors.WebDataEtlError || value.prototype instanceof errors.WebDataEtlError);
      process.stdout.write(JSON.stringify({ shared, same, errors: Object.keys(errors).filter((name) => !isError(errors[name])) }));
    `);
    expect(found.shared).toEqual([['webdata-etl', 'webdata-etl/errors', ['HeapLimitError', 'LeaseHeldError', 'OutputError', 'RunLifecycleError', 'ValidationError', 'WebDataEtlError']]]);
    expect(found.same).toEqual(Array(6).fill(true));
    // webdata-etl/errors holds error classes, and nothing else.
    expect(found.errors).toEqual([]);
  });
});
