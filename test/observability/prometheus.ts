// Prometheus for the tests: Debian's `prometheus` package's promtool (the exposition format's checker) and a real
// Prometheus server, started on loopback in a directory of its own and stopped by the test.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../postgres/pg-cluster.ts';

function runs(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0;
}

export const promtoolAvailable = runs('promtool');
export const prometheusAvailable = runs('prometheus');
/** Under CI=true a missing Prometheus fails its tests (.ci/run installs Debian's prometheus); elsewhere they are skipped. */
export const skipWithoutPrometheus = !(promtoolAvailable && prometheusAvailable) && process.env.CI !== 'true';

/** `promtool check metrics` on an exposition: its exit status and what it said (problems, one a line). */
export function checkMetrics(text: string): { status: number | null; said: string } {
  const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: result.status, said: `${result.stdout}${result.stderr}${result.error?.message ?? ''}` };
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of an exposition in Prometheus' text format (ours escapes no quote inside a label value it tests). */
export function samples(text: string): Sample[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a sample line: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((label) => [label[1], label[2]]));
      return { name: match[1] as string, labels, value: Number(match[3]) };
    });
}

/** The sum of a metric's samples whose labels match `where` (0 when it has none: a counter never added to is absent). */
export function total(all: Sample[], name: string, where: Record<string, string> = {}): number {
  return all
    .filter((sample) => sample.name === name && Object.entries(where).every(([key, value]) => sample.labels[key] === value))
    .reduce((sum, sample) => sum + sample.value, 0);
}

export interface PrometheusServer {
  readonly url: string;
  /** An instant query of the HTTP API: each series' labels and value. */
  query(expression: string): Promise<{ labels: Record<string, string>; value: number }[]>;
  stop(): Promise<void>;
}

/**
 * A Prometheus server on a free loopback port that scrapes `target` (host:port) every second, with its data in a
 * temporary directory; resolves once it says it is ready. Never the package's own service: nothing here uses it.
 */
export async function startPrometheus(target: string): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), 'webdata-prometheus-'));
  // JSON is YAML.
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    scrape_configs: [{ job_name: 'webdata-etl', static_configs: [{ targets: [target] }] }],
  };
  writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config));
  let child: ChildProcess | undefined;
  let log = '';
  let url = '';
  // Between freePort letting its port go and Prometheus taking it, another process may take it: a new port then.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    child = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    log = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
    });
    let gone = false;
    const exited = new Promise<number | null>((resolve) =>
      child?.once('exit', (code) => {
        gone = true;
        resolve(code);
      }),
    );
    const ready = (async () => {
      while (!gone) {
        const answer = await fetch(`${url}/-/ready`).catch(() => undefined);
        if (answer?.ok) return true;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return false;
    })();
    const outcome = await Promise.race([ready, exited]);
    if (outcome === true) break;
    if (attempt >= 3 || !/address already in use/.test(log)) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`prometheus exited (${outcome}) before it was ready:\n${log.split('\n').slice(-15).join('\n')}`);
    }
  }
  const running = child;
  return {
    url,
    async query(expression) {
      const answer = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expression)}`);
      const body = (await answer.json()) as { status: string; error?: string; data?: { result: { metric: Record<string, string>; value: [number, string] }[] } };
      if (body.status !== 'success') throw new Error(`prometheus refused ${expression}: ${body.error}`);
      return (body.data?.result ?? []).map((series) => ({ labels: series.metric, value: Number(series.value[1]) }));
    },
    async stop() {
      if (running.exitCode === null && running.signalCode === null) {
        const exited = new Promise((resolve) => running.once('exit', resolve));
        running.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
