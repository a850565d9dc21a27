import type { SendSamples } from './send-samples.ts';

/**
 * A proven stretch (SendSamples.provenLimit) counts when this long at least (a shorter one says little); longer when
 * the answers come from other processes, late and timed roughly.
 */
const SPAN_MS = { alone: 3000, shared: 10_000 };

/**
 * The least the server's limit can be, as a rate controller's 429s and the requests accepted after them prove it
 * (SendSamples.provenLimit): it only grows, until a 429 at a rate under it says the limit fell (or never was a
 * bucket's); then it is forgotten, and learned again from that 429 on.
 */
export class ProvenLimit {
  readonly #samples: SendSamples;
  readonly #spanMs: number;
  #proven: number | undefined;
  #since = Number.NEGATIVE_INFINITY;

  /** `shared`: the answers include other processes' (a distributed run's leader hears them late). */
  constructor(samples: SendSamples, shared: boolean) {
    this.#samples = samples;
    this.#spanMs = shared ? SPAN_MS.shared : SPAN_MS.alone;
  }

  /** A 429 just recorded in the samples, sent at `sentAt` while sending at `sendingAt` a second (when paced). */
  refused(sentAt: number, sendingAt: number | undefined): number | undefined {
    if (this.#proven !== undefined && sendingAt !== undefined && sendingAt * 1.02 < this.#proven) {
      this.#proven = undefined;
      this.#since = sentAt;
      return undefined;
    }
    return this.now();
  }

  /** What the samples prove now. */
  now(): number | undefined {
    const proven = this.#samples.provenLimit(this.#spanMs, this.#since);
    if (proven !== undefined && proven > (this.#proven ?? 0)) this.#proven = proven;
    return this.#proven;
  }
}
