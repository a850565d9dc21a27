import type { QueueAddOptions } from 'p-queue';

type Run = () => Promise<unknown>;

export type FairOptions = QueueAddOptions & {
  /** Tasks of one series are served in order; series take turns. */
  series?: string;
  /** Put the task first in its series (a request re-queued after a 429 keeps its place). */
  front?: boolean;
};

interface Entry {
  run: Run;
  id: string | undefined;
}

/**
 * A p-queue `queueClass` that serves series round-robin: each turn takes the oldest task of the next series
 * that has one, so a query with many pages cannot starve the others.
 */
export class RoundRobinQueue {
  #bySeries = new Map<string, Entry[]>();
  /** Series with waiting tasks, in turn order. */
  #turns: string[] = [];
  #next = 0;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  enqueue(run: Run, options: Partial<FairOptions> = {}): void {
    const series = options.series ?? '';
    let entries = this.#bySeries.get(series);
    if (!entries) {
      entries = [];
      this.#bySeries.set(series, entries);
      this.#turns.push(series);
    }
    const entry = { run, id: options.id };
    if (options.front) entries.unshift(entry);
    else entries.push(entry);
    this.#size += 1;
  }

  dequeue(): Run | undefined {
    if (this.#size === 0) return undefined;
    if (this.#next >= this.#turns.length) this.#next = 0;
    const series = this.#turns[this.#next] as string;
    const entries = this.#bySeries.get(series) as Entry[];
    const entry = entries.shift() as Entry;
    this.#size -= 1;
    if (entries.length === 0) {
      this.#bySeries.delete(series);
      this.#turns.splice(this.#next, 1);
    } else {
      this.#next += 1;
    }
    return entry.run;
  }

  filter(options: Readonly<Partial<FairOptions>>): Run[] {
    const series = options.series === undefined ? [...this.#bySeries.values()] : [this.#bySeries.get(options.series) ?? []];
    return series.flat().map((entry) => entry.run);
  }

  setPriority(): void {
    // Order is by series turn, not priority.
  }

  remove(idOrRun: string | Run): void {
    for (const [series, entries] of this.#bySeries) {
      const index = entries.findIndex((entry) => entry.id === idOrRun || entry.run === idOrRun);
      if (index === -1) continue;
      entries.splice(index, 1);
      this.#size -= 1;
      if (entries.length === 0) {
        this.#bySeries.delete(series);
        const turn = this.#turns.indexOf(series);
        this.#turns.splice(turn, 1);
        if (turn < this.#next) this.#next -= 1;
      }
      return;
    }
  }
}
