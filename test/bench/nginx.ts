// nginx as the rate limiter: a leaky bucket written by someone else, so the scheduler is measured against a limit
// it was not developed alongside (the simulator's token bucket and the scheduler share authors and assumptions).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

export const NGINX_BINARY = '/usr/sbin/nginx';

export interface NginxLimiter {
  /** `{base_url}` through nginx. */
  readonly url: string;
  /** Statuses nginx sent, from its access log: the server's own count, independent of the scheduler's. */
  statusCounts(): Promise<Record<string, number>>;
  /** The same by second, from the first request logged: where in a run the 429s came. */
  perSecond(): Promise<Record<string, number>[]>;
  /** Every request logged: when it ended (seconds since the epoch), its status, and its key's label (`keys` only, else '-'). */
  entries(): Promise<LogEntry[]>;
  close(): Promise<void>;
}

export interface LogEntry {
  at: number;
  status: string;
  label: string;
}

/** A key nginx limits in a zone of its own (by the `x-api-key` header), logged by its label, never by its value. */
export interface NginxKey {
  label: string;
  key: string;
  ratePerSecond: number;
}

export interface NginxOptions {
  /** `http://127.0.0.1:<port>` of the upstream (the simulator, unlimited). */
  upstreamPort: number;
  ratePerSecond: number;
  burst: number;
  /**
   * One `limit_req` zone per key instead of one for the server (each at its own rate, the same burst); a request
   * with none of these keys is not limited. Without it, one zone for every request at `ratePerSecond`.
   */
  keys?: readonly NginxKey[];
}

export function nginxAvailable(): boolean {
  return existsSync(NGINX_BINARY);
}

export async function nginxVersion(): Promise<string | undefined> {
  if (!nginxAvailable()) return undefined;
  // nginx prints its version on stderr.
  const { stderr } = await promisify(execFile)(NGINX_BINARY, ['-v']);
  return stderr.trim().replace(/^nginx version:\s*/, '');
}

/** A port that was free a moment ago; nginx cannot take port 0 and tell us which one it got. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('could not find a free port');
  return address.port;
}

/** Keys and labels go into nginx's config verbatim: bench-made values only, so that none can leave its quotes. */
const quoted = (value: string) => {
  if (!/^[A-Za-z0-9_.-]+$/.test(value)) throw new Error('nginx bench keys and labels: letters, digits, _ . - only');
  return `"${value}"`;
};

/** The zones (and their `limit_req` lines) and the access log's label: one zone for all, or one per key. */
function limits(options: NginxOptions): { http: string; location: string; label: string } {
  if (!options.keys) {
    return {
      http: `limit_req_zone $server_name zone=api:1m rate=${options.ratePerSecond}r/s;`,
      location: `limit_req zone=api burst=${options.burst} nodelay;`,
      label: '-',
    };
  }
  // A map per key gives its zone a non-empty value only for that key's requests: nginx accounts no request whose
  // zone key is empty, so each key is counted in its own zone alone.
  const labels = options.keys.map(({ key, label }) => `    ${quoted(key)} ${quoted(label)};`).join('\n');
  const zones = options.keys.map(({ key, label, ratePerSecond }) =>
    [`map $http_x_api_key $bench_zone_${label.replaceAll('-', '_')} {`, '    default "";', `    ${quoted(key)} "1";`, '  }', `  limit_req_zone $bench_zone_${label.replaceAll('-', '_')} zone=key_${label}:1m rate=${ratePerSecond}r/s;`].join('\n'),
  );
  return {
    http: `map $http_x_api_key $bench_key_label {\n    default "-";\n${labels}\n  }\n  ${zones.join('\n  ')}`,
    location: options.keys.map(({ label }) => `limit_req zone=key_${label} burst=${options.burst} nodelay;`).join('\n      '),
    label: '$bench_key_label',
  };
}

function config(dir: string, port: number, options: NginxOptions): string {
  const temp = (name: string) => join(dir, name);
  const limit = limits(options);
  // $server_name is the key, so server_name must be set: nginx does not account requests with an empty key.
  // The upstream keepalive timeout stays under Node's 5 s server default, so nginx never reuses a socket the
  // simulator is closing (which would show up as 502s that have nothing to do with the scheduler).
  return `daemon off;
master_process on;
worker_processes 1;
pid ${temp('nginx.pid')};
error_log ${temp('error.log')} warn;
events { worker_connections 1024; }
http {
  log_format status '$msec $status ${limit.label}';
  access_log ${temp('access.log')} status;
  client_body_temp_path ${temp('client_body')};
  proxy_temp_path ${temp('proxy')};
  fastcgi_temp_path ${temp('fastcgi')};
  uwsgi_temp_path ${temp('uwsgi')};
  scgi_temp_path ${temp('scgi')};
  ${limit.http}
  upstream simulator {
    server 127.0.0.1:${options.upstreamPort};
    keepalive 64;
    keepalive_timeout 4s;
  }
  server {
    listen 127.0.0.1:${port};
    server_name bench-api;
    location = /__ready { access_log off; return 204; }
    location / {
      ${limit.location}
      limit_req_status 429;
      proxy_pass http://simulator;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffers 16 16k;
    }
  }
}
`;
}

export async function startNginx(options: NginxOptions): Promise<NginxLimiter> {
  const dir = await mkdtemp(join(tmpdir(), 'webdata-bench-nginx-'));
  // Run as root, nginx hands its workers to an unprivileged user, which must be able to reach the temp paths.
  await chmod(dir, 0o755);
  const port = await freePort();
  const file = join(dir, 'nginx.conf');
  await writeFile(file, config(dir, port, options));
  const child: ChildProcess = spawn(NGINX_BINARY, ['-p', dir, '-c', file, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let running = true;
  void exited.then(() => (running = false));

  const base = `http://127.0.0.1:${port}`;
  // Each line of the access log: when the request ended (seconds, ms precision), its status and its key's label.
  const entries = async (): Promise<LogEntry[]> => {
    const text = await readFile(join(dir, 'access.log'), 'utf8').catch(() => '');
    return text
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const [at, status, label] = line.trim().split(' ');
        return { at: Number(at), status: status ?? '', label: label ?? '-' };
      });
  };
  const deadline = performance.now() + 10_000;
  for (;;) {
    if (!running) {
      const log = await readFile(join(dir, 'error.log'), 'utf8').catch(() => '');
      await rm(dir, { recursive: true, force: true });
      throw new Error(`nginx exited at start: ${stderr}${log}`);
    }
    try {
      const response = await fetch(`${base}/__ready`);
      if (response.status === 204) break;
    } catch {
      // Not listening yet.
    }
    if (performance.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`nginx did not answer within 10 s: ${stderr}`);
    }
    await sleep(50);
  }

  return {
    url: `${base}/api/v1`,
    entries,
    async statusCounts() {
      const counts: Record<string, number> = {};
      for (const { status } of await entries()) counts[status] = (counts[status] ?? 0) + 1;
      return counts;
    },
    async perSecond() {
      const logged = await entries();
      const first = Math.min(...logged.map((entry) => entry.at));
      const seconds: Record<string, number>[] = [];
      for (const { at, status } of logged) {
        const second = (seconds[Math.floor(at - first)] ??= {});
        second[status] = (second[status] ?? 0) + 1;
      }
      return Array.from(seconds, (second) => second ?? {});
    },
    async close() {
      if (running) {
        // SIGQUIT lets the worker finish what it is serving; SIGTERM if it lingers.
        child.kill('SIGQUIT');
        const timer = setTimeout(() => child.kill('SIGTERM'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
