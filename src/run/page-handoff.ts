/**
 * One page at a time from a run's sink to a program's loop, acknowledged by the next pull
 * (docs/pipelines.md#streaming-pages-to-your-program-stream). The sink's side offers a page and waits until the program
 * has pulled the one after it (or has left): the committer waits with it, and so, through the page permits, do the
 * requests — a slow loop slows the run, memory stays bounded.
 */
export class PageHandoff<T> {
  /** The page the program holds, not yet acknowledged, and how to tell its sink. */
  #held: { value: T; settle(acked: boolean): void } | undefined;
  /** A page offered while the program is not pulling. */
  #offered: { value: T; settle(acked: boolean): void } | undefined;
  /** The program's pull, waiting for a page or the end. */
  #pulling: { resolve(result: IteratorResult<T>): void; reject(error: unknown): void } | undefined;
  #ended: { error?: unknown } | undefined;
  #closed = false;

  /**
   * The sink's side: resolves to true once the program is done with `value` (it pulled the next one), false when it
   * left with it unfinished (`close`), or at once when it had left already.
   */
  offer(value: T): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    return new Promise<boolean>((settle) => {
      const pulling = this.#pulling;
      if (pulling) {
        this.#pulling = undefined;
        this.#held = { value, settle };
        pulling.resolve({ done: false, value });
      } else this.#offered = { value, settle };
    });
  }

  /** The program's side: acknowledges the page it held, then waits for the next one or the end. */
  pull(): Promise<IteratorResult<T>> {
    this.#held?.settle(true);
    this.#held = undefined;
    const offered = this.#offered;
    if (offered) {
      this.#offered = undefined;
      this.#held = offered;
      return Promise.resolve({ done: false, value: offered.value });
    }
    const ended = this.#ended;
    if (ended) return 'error' in ended ? Promise.reject(ended.error) : Promise.resolve({ done: true, value: undefined });
    if (this.#closed) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve, reject) => {
      this.#pulling = { resolve, reject };
    });
  }

  /** The program left (`break`, `return`, a throw): the page it held is not acknowledged, and no page is taken after it. */
  close(): void {
    this.#closed = true;
    this.release();
    this.#pulling?.resolve({ done: true, value: undefined });
    this.#pulling = undefined;
  }

  /** The run let its sink go: a page still offered or held is not acknowledged; the run's end (`end`) follows. */
  release(): void {
    this.#held?.settle(false);
    this.#held = undefined;
    this.#offered?.settle(false);
    this.#offered = undefined;
  }

  /** The run ended: a waiting pull ends too (with the run's failure, if it failed). */
  end(error?: unknown): void {
    this.#ended = error === undefined ? {} : { error };
    const pulling = this.#pulling;
    this.#pulling = undefined;
    if (!pulling) return;
    if (error === undefined) pulling.resolve({ done: true, value: undefined });
    else pulling.reject(error);
  }
}
