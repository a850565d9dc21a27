import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LAST_DAY } from './days.ts';
import { faultBook } from './faults.ts';
import { groundTruth } from './ground-truth.ts';
import { PREFIX, SimulatedApi } from './handler.ts';
import { KeyRing } from './key-ring.ts';
import { keySchema, type ResolvedSimulatorOptions, resolveSimulatorOptions, type SimulatorOptions } from './options.ts';
import { ParkingLot } from './parking.ts';
import { send } from './replies.ts';
import { Traffic } from './traffic.ts';
import type { Simulator } from './types.ts';

export type { Gate, LogEntry, RankedResult, SeriesOf, Simulator, SimulatorStats } from './types.ts';

/** Starts the contract-faithful simulator on loopback. Resolves once it listens (milliseconds). */
export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const settings = resolveSimulatorOptions(options);
  const clock = settings.clock ?? (() => performance.now());
  const epoch = settings.epoch ?? (() => Date.now());
  const keys = settings.keys ?? [keySchema.parse({ key: `sim_${randomBytes(12).toString('hex')}`, name: 'default' })];
  const keyRing = new KeyRing(keys, clock);
  const faults = faultBook(settings);
  const traffic = new Traffic(settings.logLimit);
  const parking = new ParkingLot();
  let day = settings.day;
  const api = new SimulatedApi({ settings, clock, epoch, day: () => day, keys: keyRing, faults, traffic, parking });
  const server = await listen(api, settings);
  const { port } = server.address() as AddressInfo;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;

  const close = async () => {
    api.letGo();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };

  return {
    url: `http://${host}:${port}${PREFIX}`,
    port,
    apiKey: keys[0]?.key,
    stats: () => traffic.stats(keyRing.credits()),
    log: () => traffic.log(),
    resetStats() {
      traffic.reset();
    },
    inject: (rule) => faults.add(rule),
    clearRules: () => faults.clear(),
    park(match = {}) {
      return parking.park(match);
    },
    updateKey(name, patch) {
      keyRing.update(name, patch);
    },
    get day() {
      return day;
    },
    setDay(next) {
      day = checkedDay(next);
    },
    advanceDay() {
      day = checkedDay(day === undefined ? 0 : day + 1);
      return day;
    },
    ...groundTruth(settings, () => day),
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** A day the simulator can live: an integer from 0 to LAST_DAY, or a RangeError naming the bound. */
function checkedDay(day: number): number {
  if (!Number.isInteger(day) || day < 0 || day > LAST_DAY) throw new RangeError(`day must be an integer from 0 to ${LAST_DAY}; got ${day}`);
  return day;
}

/** An HTTP server answering with `api`, listening where the settings say. */
async function listen(api: SimulatedApi, settings: ResolvedSimulatorOptions): Promise<Server> {
  const server = createServer({ keepAlive: true }, (req, res) => {
    api.handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) send(res, 500, { error: { code: 'internal', message: String(error) } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, settings.host, () => resolve());
  });
  return server;
}
