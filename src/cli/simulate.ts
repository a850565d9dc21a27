import { parseArgs } from 'node:util';
import { startSimulator } from '../simulator/server.ts';
import { UsageError } from '../errors/usage-error.ts';

export const simulateHelp = `Usage: webdata-etl simulate [options]

Runs the contract-faithful simulator of the API on loopback until interrupted, and prints the two
environment variables that point webdata-etl at it.

Options:
  --port <n>        port to listen on (default 8787; 0 picks a free one)
  --seed <n>        changes every generated result (default 1)
  --key <key>       the API key it accepts (default: a random one, printed)
  --rate <n>        requests per second the key may send (default 10)
  --burst <n>       requests the key may send at once after a pause (default 5)
  --credits <n>     the key's credit balance (default 10000)
  --latency <ms>    answer every request this late (default 20)
  --drift-every <t> re-rank neighbouring results every period of wall-clock time, as run --simulator and worker
                    --simulator do (5s), so that runs some seconds apart see rankings move: milliseconds (5000)
                    or a duration (500ms, 5s, 2m, 1h); default 0, never (the same results every time)
  -h, --help        show this help
`;

export async function simulate(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      port: { type: 'string', default: '8787' },
      seed: { type: 'string', default: '1' },
      key: { type: 'string' },
      rate: { type: 'string', default: '10' },
      burst: { type: 'string', default: '5' },
      credits: { type: 'string', default: '10000' },
      latency: { type: 'string', default: '20' },
      'drift-every': { type: 'string', default: '0' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(simulateHelp);
    return;
  }
  const number = (name: keyof typeof values, min: number) => {
    const value = Number(values[name]);
    if (!Number.isFinite(value) || value < min) throw new UsageError(`--${name} must be a number of at least ${min}; got "${String(values[name])}"`);
    return value;
  };
  const key = values.key ?? `sim_${crypto.randomUUID().replaceAll('-', '')}`;
  const sim = await startSimulator({
    port: number('port', 0),
    seed: Math.trunc(number('seed', 0)),
    latencyMs: number('latency', 0),
    driftEveryMs: millisecondsOf('--drift-every', values['drift-every']),
    keys: [{ key, name: 'default', ratePerSecond: number('rate', 0.001), burst: Math.trunc(number('burst', 1)), credits: number('credits', 0) }],
  });
  process.stdout.write(`WEBDATA_BASE_URL=${sim.url}\nWEBDATA_API_KEY=${key}\n`);
  process.stderr.write(`Simulator listening at ${sim.url} (Ctrl-C to stop)\n`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  const stats = sim.stats();
  await sim.close();
  process.stderr.write(`Simulator stopped after ${stats.requests} requests; credits debited: ${stats.credits.default?.debited ?? 0}\n`);
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** A period given as milliseconds (`5000`) or a duration (`500ms`, `5s`, `2m`, `1h`): whole milliseconds, 0 or more. */
function millisecondsOf(flag: string, value: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  const ms = match ? Math.round(Number(match[1]) * (UNIT_MS[match[2] ?? 'ms'] as number)) : Number.NaN;
  if (!Number.isSafeInteger(ms)) throw new UsageError(`${flag} must be milliseconds (5000) or a duration such as 500ms, 5s, 2m or 1h (0: never); got "${value}"`);
  return ms;
}
