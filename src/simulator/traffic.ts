import type { LogEntry, SimulatorStats } from './types.ts';

type TrafficStats = Omit<SimulatorStats, 'credits'>;

/** What the simulator has seen: counts by status, path and fault, requests in flight, and the request log. */
export class Traffic {
  readonly #logLimit: number;
  #stats = emptyStats();
  #entries: LogEntry[] = [];
  /** Requests arrived since the start (never reset): numbers each its `x-request-id`. */
  #arrivals = 0;

  constructor(logLimit: number) {
    this.#logLimit = logLimit;
  }

  /** A request arrives: counted in flight; returns its request id. */
  arrive(): string {
    this.#arrivals += 1;
    this.#stats.inFlight += 1;
    this.#stats.maxInFlight = Math.max(this.#stats.maxInFlight, this.#stats.inFlight);
    return `sim-${this.#arrivals}`;
  }

  /** A request has been answered (or left unanswered): counted and logged. */
  end(entry: LogEntry): void {
    const stats = this.#stats;
    stats.inFlight -= 1;
    stats.requests += 1;
    const status = String(entry.status);
    stats.byStatus[status] = (stats.byStatus[status] ?? 0) + 1;
    stats.byPath[entry.path] = (stats.byPath[entry.path] ?? 0) + 1;
    if (entry.fault) stats.faults[entry.fault] = (stats.faults[entry.fault] ?? 0) + 1;
    if (this.#logLimit > 0) {
      this.#entries.push(entry);
      if (this.#entries.length > this.#logLimit) this.#entries = this.#entries.slice(-this.#logLimit);
    }
  }

  stats(credits: SimulatorStats['credits']): SimulatorStats {
    const stats = this.#stats;
    return { ...stats, byStatus: { ...stats.byStatus }, byPath: { ...stats.byPath }, faults: { ...stats.faults }, credits };
  }

  log(): readonly LogEntry[] {
    return this.#entries.slice();
  }

  /** Starts counting and logging afresh; requests in flight stay counted. */
  reset(): void {
    this.#stats = { ...emptyStats(), inFlight: this.#stats.inFlight };
    this.#entries = [];
  }
}

function emptyStats(): TrafficStats {
  return { requests: 0, byStatus: {}, byPath: {}, faults: {}, inFlight: 0, maxInFlight: 0 };
}
