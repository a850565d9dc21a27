/**
 * A bounded async queue between producers (series fetching pages) and one consumer (the stages). `push` waits
 * while the queue is full, so a slow sink slows the source instead of buffering the world.
 */
export interface Channel<T> extends AsyncIterable<T> {
  push(item: T): Promise<void>;
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
    close() {
      closed = true;
      wake();
    },
    cancel(reason) {
      if (cancelled) return;
      cancelled = { reason };
      queue.length = 0;
      for (const producer of waitingProducers.splice(0)) producer.reject(reason);
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
            yield item;
            continue;
          }
          if (closed) return;
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
