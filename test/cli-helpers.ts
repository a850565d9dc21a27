import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { TEST_KEY } from './helpers.ts';

export const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'src/cli/main.ts');

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a user runs it: a child process, in a directory of its own, with the environment given. */
export function cli(args: string[], options: { cwd: string; env?: Record<string, string>; onStderr?: (text: string, kill: (signal: NodeJS.Signals) => void) => void }) {
  const { WEBDATA_BASE_URL: _u, WEBDATA_API_KEY: _k, WEBDATA_TOKEN: _t, WEBDATA_CRASH_AT: _c, ...inherited } = process.env;
  const child = spawn(process.execPath, ['--conditions=webdata-etl:source', CLI, ...args], {
    cwd: options.cwd,
    env: { ...inherited, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const sent = new Set<NodeJS.Signals>();
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    options.onStderr?.(stderr, (signal) => {
      // Once per signal: a second SIGINT would mean "abort", and one after exit would kill the bare process.
      if (sent.has(signal)) return;
      sent.add(signal);
      child.kill(signal);
    });
  });
  return new Promise<Result>((done, fail) =>
    child.on('exit', (code) => {
      // Whatever a command prints, the key is never part of it.
      if ((stdout + stderr).includes(TEST_KEY)) fail(new Error(`webdata-etl ${args.join(' ')} printed the API key`));
      else done({ code, stdout, stderr });
    }),
  );
}

export function config(dir: string, overrides: Record<string, unknown> = {}, search: Record<string, unknown> = {}) {
  const file = join(dir, `pipeline-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      name: 'cli-test',
      search: { queries: ['espresso', 'kettle'], countries: ['us', 'gb'], maxPages: 2, ...search },
      dedupe: { key: 'url' },
      sinks: [
        { type: 'sqlite', path: 'out/results.sqlite' },
        { type: 'csv', path: 'out/results.csv' },
      ],
      ...overrides,
    }),
  );
  return file;
}

export const envFor = (url: string, key = TEST_KEY) => ({ WEBDATA_BASE_URL: url, WEBDATA_API_KEY: key });

