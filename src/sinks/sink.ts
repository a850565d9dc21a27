import type Database from 'better-sqlite3';
import type { Page } from '../pipeline/page.ts';
import type { NormalizedItem } from '../stages/normalized-item.ts';

/** What a sink gets when the run opens it. */
export interface SinkContext {
  readonly runId: string;
  readonly pipeline: string;
  /** One connection per database file within a run, shared with the state store so that they can commit together. */
  database(path: string): Database.Database;
}

/**
 * Where pages go. A sink writes each page it is given once, in one commit (a transaction, or a synchronous write),
 * so that a page is either wholly in it or not at all. Sinks are plug-ins: anything with these methods is one.
 */
export interface Sink<I = NormalizedItem> {
  /** e.g. `sqlite`, `csv`. */
  readonly kind: string;
  /** The file written, resolved. */
  readonly path: string;
  open(ctx: SinkContext): void | Promise<void>;
  write(page: Page<I>): void | Promise<void>;
  close(): void | Promise<void>;
}
