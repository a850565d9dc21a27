// Every error the library throws on purpose is of one base class, WebDataEtlError, in src/errors/ one to a file, all
// exported by src/errors/index.ts (webdata-etl/errors); the package root exports the few a caller of run() acts on.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as root from '../../src/index.ts';
import * as errors from '../../src/errors/index.ts';

const SRC = join(import.meta.dirname, '..', '..', 'src');
const filesOf = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? filesOf(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : []));

// Every value src/errors/index.ts exports is a class.
const classes = Object.entries(errors) as [string, { prototype: Error }][];

describe('the error classes', () => {
  it('each extends WebDataEtlError; the root exports some of them, the same classes, and no other', () => {
    expect(classes.length).toBeGreaterThan(20);
    for (const [name, Class] of classes) {
      expect(Class === errors.WebDataEtlError || Class.prototype instanceof errors.WebDataEtlError, name).toBe(true);
      if (name in root) expect((root as Record<string, unknown>)[name], name).toBe(Class);
    }
    const rootErrors = Object.keys(root).filter((name) => name.endsWith('Error'));
    expect(rootErrors.filter((name) => !(name in errors))).toEqual([]);
    expect(rootErrors).toContain('WebDataEtlError');
  });

  it('keep their names: an instance is named as its class', () => {
    const details = { path: '/searchengine/search' };
    const made: Error[] = [
      new errors.RateLimitError('slow down', { ...details, retryAfterMs: 1000 }),
      new errors.NetworkError('reset', details),
      new errors.ValidationError('Invalid options', [{ path: 'country', message: 'must be a code' }]),
      new errors.UsageError('no file'),
      new errors.OutputError('full', 'the disk is full', undefined),
      new errors.LeaseHeldError('held', { pipeline: 'p', pid: 1, host: 'h', since: 'now' }),
      new errors.RunAtWorkError('at work', 'run-1'),
      new errors.RunEndedError('ended', 'run-1'),
      new errors.HeapLimitError('the run used up its heap'),
      new errors.WorkerExpiredError('presumed dead'),
      new errors.SeriesLostError('s1', 'taken over'),
      new errors.UnstorablePageError({ seriesId: 's1', page: 2, retryFrom: 2 }, 'refused', undefined),
    ];
    for (const error of made) {
      expect(error.name).toBe(error.constructor.name);
      expect(error).toBeInstanceOf(errors.WebDataEtlError);
    }
  });

  it('live in src/errors/, one to a file: no other module declares one', () => {
    const declared = filesOf(SRC).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/^export class (\w+) extends (\w+)/gm)].filter((match) => /Error$/.test(match[2] ?? '')).map((match) => `${relative(SRC, file)}: ${match[1]}`),
    );
    expect(declared.filter((line) => !line.startsWith('errors/'))).toEqual([]);
    const perFile = new Map<string, number>();
    for (const line of declared) perFile.set(line.split(':')[0] ?? '', (perFile.get(line.split(':')[0] ?? '') ?? 0) + 1);
    expect([...perFile].filter(([, count]) => count > 1)).toEqual([]);
  });
});
