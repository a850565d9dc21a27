/** Deterministic hashing and pseudo-random numbers, so that the simulator answers the same way for the same seed. */

/** A 32-bit FNV-1a hash of the parts, joined unambiguously. */
export function hash(...parts: ReadonlyArray<string | number>): number {
  let h = 0x811c9dc5;
  const text = parts.join('\u0001');
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // A final avalanche so that nearby inputs give unrelated values.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A number in [0, 1) from the parts. */
export function unit(...parts: ReadonlyArray<string | number>): number {
  return hash(...parts) / 2 ** 32;
}

/** mulberry32: a small, fast generator for sequences (fault rates in arrival order). */
export function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

export function pick<T>(items: readonly T[], value: number): T {
  return items[Math.floor(value * items.length) % items.length] as T;
}
