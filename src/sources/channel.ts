/**
 * A bounded async queue between producers (series fetching pages) and one consumer (the stages). `push` waits
 * while the queue is full, so a slow sink slows the source instead of buffering the world.
 */
export interface Channel<T> extends AsyncIterable<T> {
  push(item: T): Promise<void>;
  /** Resolves once fewer than `n` items wait for the consumer (it keeps up): producers ask before they make more. */
  room(n: number): Promise<void>;
  /** No more items: the consumer ends after the queued ones. */
  close(): void;
  /** The consumer went away (or failed): waiting and later pushes reject with `reason`. */
  cancel(reason: unknown): void;
}

export function createChannel<T>(capacity: number): Channel<T> {
  const queue: T[] = [];
  let closed = false;
  let cancelled: { reason: unknown } | undefined;
  let wakeConsumer: (() => void) | undefined;
  const waitingProducers: { resolve: () => void; reject: (reason: unknown) => void }[] = [];
  // Producers waiting for the queue to be shorter than their `n`: each item taken lets the first of them go.
  const waitingForRoom: { n: number; resolve: () => void; reject: (reason: unknown) => void }[] = [];

  const wake = () => {
    const w = wakeConsumer;
    wakeConsumer = undefined;
    w?.();
  };

  const channel: Channel<T> = {
    push(item) {
      if (cancelled) return Promise.reject(cancelled.reason);
      if (closed) return Promise.reject(new Error('push to a closed channel'));
      queue.push(item);
      wake();
      if (queue.length <= capacity) return Promise.resolve();
      return new Promise<void>((resolve, reject) => waitingProducers.push({ resolve, reject }));
    },
    room(n) {
      if (cancelled) return Promise.reject(cancelled.reason);
      if (queue.length < n && waitingForRoom.length === 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => waitingForRoom.push({ n, resolve, reject }));
    },
    close() {
      closed = true;
      wake();
      // Nothing more will be taken from a closed queue's producers: they go on (and find it closed).
      for (const waiter of waitingForRoom.splice(0)) waiter.resolve();
    },
    cancel(reason) {
      if (cancelled) return;
      cancelled = { reason };
      queue.length = 0;
      for (const producer of [...waitingProducers.splice(0), ...waitingForRoom.splice(0)]) producer.reject(reason);
      wake();
    },
    async *[Symbol.asyncIterator]() {
      try {
        for (;;) {
          if (cancelled) return;
          const item = queue.shift();
          if (item !== undefined) {
            // Room again: let one waiting producer go on.
            if (queue.length < capacity) waitingProducers.shift()?.resolve();
            const first = waitingForRoom[0];
            if (first && queue.length < first.n) waitingForRoom.shift()?.resolve();
            yield item;
            continue;
          }
          if (closed) return;
          // Nothing waits: every producer holding back may go (one that makes nothing must not leave the rest waiting).
          for (const waiter of waitingForRoom.splice(0)) waiter.resolve();
          await new Promise<void>((resolve) => {
            wakeConsumer = resolve;
          });
        }
      } finally {
        channel.cancel(new Error('the consumer stopped reading'));
      }
    },
  };
  return channel;
}
