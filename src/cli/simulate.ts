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
