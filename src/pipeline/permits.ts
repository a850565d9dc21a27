/**
 * A fixed number of permits, taken in turn. The run holds one for each page from before its request is sent until
 * the page is committed: however the pages queue between the network and the commit, no more than this many are
 * ever paid for and not yet committed — the most a killed process can make a resume pay again.
 */
export interface Permits {
  /** Resolves with the release (idempotent) once a permit is free; rejects if `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<() => void>;
  /** Permits held now: pages paid for (or being paid for) and not yet committed. */
  readonly held: number;
  /** Takers waiting for a permit: requests held back because the stages and commits are behind (backpressure). */
  readonly waiting: number;
}

export function createPermits(size: number): Permits {
  let free = size;
  const waiters: (() => void)[] = [];

  const grant = (): (() => void) => {
    free -= 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      free += 1;
      waiters.shift()?.();
    };
  };

  return {
    get held() {
      return size - free;
    },
    get waiting() {
      return waiters.length;
    },
    acquire(signal) {
      if (signal.aborted) return Promise.reject(signal.reason);
      if (free > 0 && waiters.length === 0) return Promise.resolve(grant());
      return new Promise((resolve, reject) => {
        const wake = () => {
          signal.removeEventListener('abort', abort);
          resolve(grant());
        };
        const abort = () => {
          const index = waiters.indexOf(wake);
          if (index >= 0) waiters.splice(index, 1);
          reject(signal.reason);
        };
        waiters.push(wake);
        signal.addEventListener('abort', abort, { once: true });
      });
    },
  };
}
