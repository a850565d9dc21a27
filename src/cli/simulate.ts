import { parseArgs } from 'node:util';
import { startSimulator } from '../simulator/server.ts';
import { UsageError } from '../errors/usage-error.ts';
import { simulatedDay } from './cli-simulator.ts';
import { parseSimulatorKeys, SIMULATOR_KEYS_SYNTAX } from './simulator-keys.ts';

export const simulateHelp = `Usage: webdata-etl simulate [options]

Runs the contract-faithful simulator of the API on loopback until interrupted, and prints the two
environment variables that point webdata-etl at it (WEBDATA_API_KEYS with --keys).

Options:
  --port <n>        port to listen on (default 8787; 0 picks a free one)
  --seed <n>        changes every generated result (default 1)
  --key <key>       the API key it accepts (default: a random one, printed)
  --rate <n>        requests per second the key may send (default 10)
  --burst <n>       requests the key may send at once after a pause (default 5)
  --credits <n>     the key's credit balance (default 10000)
  --keys <keys>     several keys instead, each with its own limits and credits, each a random key:
                    ${SIMULATOR_KEYS_SYNTAX} (burst 5 and credits 10000
                    unless given; @n: revoked, 401, after n requests), e.g. main:8,second:4/2,spare:2/2/500@40;
                    prints WEBDATA_API_KEYS=main=…,second=…,spare=… (not with --key, --rate, --burst, --credits)
  --latency <ms>    answer every request this late (default 20)
  --drift-every <t> re-rank neighbouring results every period of wall-clock time, as run --simulator and worker
                    --simulator do (5s), so that runs some seconds apart see rankings move: milliseconds (5000)
                    or a duration (500ms, 5s, 2m, 1h); default 0, never (the same results every time)
  --day <n>         answer as on simulated day n (0 to 3650): each series keeps its ranking from day to day
                    unless it moves, at a rate of its own, and the same query on the same day is answered the
                    same; not with --drift-every
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
      rate: { type: 'string' },
      burst: { type: 'string' },
      credits: { type: 'string' },
      keys: { type: 'string' },
      latency: { type: 'string', default: '20' },
      'drift-every': { type: 'string', default: '0' },
      day: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(simulateHelp);
    return;
  }
  const number = (name: 'port' | 'seed' | 'latency' | 'rate' | 'burst' | 'credits', min: number, fallback = '') => {
    const given = values[name] ?? fallback;
    const value = Number(given);
    if (!Number.isFinite(value) || value < min) throw new UsageError(`--${name} must be a number of at least ${min}; got "${given}"`);
    return value;
  };
  const keys = simulatedKeys(values, number);
  const day = values.day === undefined ? undefined : simulatedDay('--day', values.day);
  const driftEveryMs = millisecondsOf('--drift-every', values['drift-every']);
  if (day !== undefined && driftEveryMs > 0) throw new UsageError('--day and --drift-every contradict each other: a simulated day answers the same whatever the time; choose one');
  const sim = await startSimulator({
    port: number('port', 0),
    seed: Math.trunc(number('seed', 0)),
    latencyMs: number('latency', 0),
    driftEveryMs,
    day,
    keys,
  });
  // One line a shell takes as it is: keys of the simulator's making, a label each (WEBDATA_API_KEYS' syntax).
  const credentials = values.keys === undefined ? `WEBDATA_API_KEY=${keys[0]?.key}` : `WEBDATA_API_KEYS=${keys.map(({ name, key }) => `${name}=${key}`).join(',')}`;
  process.stdout.write(`WEBDATA_BASE_URL=${sim.url}\n${credentials}\n`);
  process.stderr.write(`Simulator listening at ${sim.url} (Ctrl-C to stop)\n`);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  const stats = sim.stats();
  await sim.close();
  const debited = Object.entries(stats.credits).map(([name, { debited }]) => (values.keys === undefined ? `${debited}` : `${name} ${debited}`));
  process.stderr.write(`Simulator stopped after ${stats.requests} requests; credits debited: ${debited.join(', ')}\n`);
}

/** The keys to simulate: `--keys`' pool, or the one key of `--key`, `--rate`, `--burst` and `--credits`. */
function simulatedKeys(
  values: { key?: string | undefined; keys?: string | undefined; rate?: string | undefined; burst?: string | undefined; credits?: string | undefined },
  number: (name: 'rate' | 'burst' | 'credits', min: number, fallback: string) => number,
): { key: string; name: string; ratePerSecond: number; burst: number; credits: number; revokeAfter: number | null }[] {
  const random = () => `sim_${crypto.randomUUID().replaceAll('-', '')}`;
  if (values.keys === undefined) {
    return [{ key: values.key ?? random(), name: 'default', ratePerSecond: number('rate', 0.001, '10'), burst: Math.trunc(number('burst', 1, '5')), credits: number('credits', 0, '10000'), revokeAfter: null }];
  }
  const beside = (['key', 'rate', 'burst', 'credits'] as const).filter((name) => values[name] !== undefined);
  if (beside.length > 0) {
    throw new UsageError(`--keys gives each key its own limits: ${beside.map((name) => `--${name}`).join(', ')} ${beside.length > 1 ? 'are' : 'is'} for one key; give the pool's in --keys (${SIMULATOR_KEYS_SYNTAX})`);
  }
  const plans = parseSimulatorKeys('--keys', values.keys, { burst: 5, credits: 10_000 });
  return plans.map((plan) => ({ key: random(), name: plan.label, ratePerSecond: plan.ratePerSecond, burst: plan.burst, credits: plan.credits, revokeAfter: plan.revokeAfter ?? null }));
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** A period given as milliseconds (`5000`) or a duration (`500ms`, `5s`, `2m`, `1h`): whole milliseconds, 0 or more. */
function millisecondsOf(flag: string, value: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  const ms = match ? Math.round(Number(match[1]) * (UNIT_MS[match[2] ?? 'ms'] as number)) : Number.NaN;
  if (!Number.isSafeInteger(ms)) throw new UsageError(`${flag} must be milliseconds (5000) or a duration such as 500ms, 5s, 2m or 1h (0: never); got "${value}"`);
  return ms;
}
