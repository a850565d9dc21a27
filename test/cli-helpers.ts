import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { TEST_KEY, until } from './helpers.ts';

export const ROOT = resolve(import.meta.dirname, '..');
const CLI = join(ROOT, 'src/cli/main.ts');

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a user runs it: a child process, in a directory of its own, with the environment given. */
export function cli(args: string[], options: { cwd: string; env?: Record<string, string>; nodeFlags?: string[] }): Promise<Result> {
  return startCli(args, options).done;
}

/**
 * The CLI started and left running, for a test that acts on it meanwhile (a signal, another run). A test acts once
 * the run is where it needs it and cannot move on (held by the simulator's gate: `whileRunning(gate.reached())`),
 * never after a guessed time: a loaded machine starts processes and runs pages at any speed.
 */
export function startCli(args: string[], options: { cwd: string; env?: Record<string, string>; nodeFlags?: string[] }) {
  return startNode([...(options.nodeFlags ?? []), '--conditions=webdata-etl:source', CLI, ...args], `webdata-etl ${args.join(' ')}`, options);
}

/** A pipeline file run by node as a user runs it (`node pipeline.ts …`: the built package, no flags of ours). */
export function pipelineFile(file: string, args: string[], options: { cwd: string; env?: Record<string, string> }): Promise<Result> {
  return startPipelineFile(file, args, options).done;
}

/** A pipeline file run by node and left running, as `startCli` leaves the CLI. */
export function startPipelineFile(file: string, args: string[], options: { cwd: string; env?: Record<string, string> }) {
  return startNode([file, ...args], `node ${file} ${args.join(' ')}`, options);
}

/** node with `nodeArgs`, named `label` in what a test reports, with none of our variables but those given. */
function startNode(nodeArgs: string[], label: string, options: { cwd: string; env?: Record<string, string> }) {
  const { WEBDATA_BASE_URL: _u, WEBDATA_API_KEY: _k, WEBDATA_API_KEYS: _ks, WEBDATA_API_KEYS_FILE: _kf, WEBDATA_TOKEN: _t, WEBDATA_CRASH_AT: _c, WEBDATA_WEBHOOK_SECRET: _w, ...inherited } = process.env;
  const child = spawn(process.execPath, nodeArgs, {
    cwd: options.cwd,
    env: { ...inherited, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    for (const watch of watchers) watch();
  });
  // 'close', not 'exit': at 'exit' the last of stdout may not have been read yet.
  const done = new Promise<Result>((resolve, reject) =>
    child.on('close', (code) => {
      // Whatever a command prints, the key is never part of it.
      if ((stdout + stderr).includes(TEST_KEY)) reject(new Error(`${label} printed the API key`));
      else resolve({ code, stdout, stderr });
    }),
  );
  /** `promise`, or a rejection with the process's output if it ends first (instead of a wait until the test's timeout). */
  const whileRunning = <T>(promise: Promise<T>): Promise<T> =>
    Promise.race([
      promise,
      done.then((result) => {
        throw new Error(`${label} ended (exit ${result.code}) before the test could act on it:\n${result.stderr}`);
      }),
    ]);
  return {
    child,
    done,
    whileRunning,
    /** What the process has written so far. */
    output: (): { stdout: string; stderr: string } => ({ stdout, stderr }),
    /** Resolves once stderr shows `text`. */
    printed(text: string): Promise<void> {
      return whileRunning(
        new Promise<void>((resolve) => {
          const watch = () => {
            if (!stderr.includes(text)) return;
            watchers.delete(watch);
            resolve();
          };
          watchers.add(watch);
          watch();
        }),
      );
    },
  };
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


/**
 * `webdata-etl run <file>` with its Prometheus endpoint lingering for the final scrape: the page scraped once the run
 * printed its summary, and how the command ended.
 */
export async function runScraped(file: string, options: { cwd: string; env?: Record<string, string> }) {
  const running = startCli(['run', file, '--metrics-port', '0', '--metrics-linger', '600'], options);
  await running.printed('metrics: waiting up to 600s for a scrape of the final figures');
  await running.whileRunning(until(() => running.output().stdout.trimEnd().endsWith('}')));
  const url = /metrics: (http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(running.output().stderr)?.[1] as string;
  const scraped = await running.whileRunning(fetch(url).then((answer) => answer.text()));
  return { scraped, result: await running.done };
}
