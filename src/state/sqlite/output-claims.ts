import { basename, dirname, join } from 'node:path';
import type Database from 'better-sqlite3';
import { ValidationError } from '../../errors/validation-error.ts';
import { CLAIM_SQL } from './statements.ts';

/**
 * File outputs of a directory are registered in one small SQLite file there: which pipelines write each file and the
 * lease of the one writing it now. It sits beside the files because that is the one place every pipeline that
 * writes them looks, whatever its own state store.
 */
export const OUTPUT_REGISTRY = '.webdata-outputs.sqlite';

export function registryPathFor(file: string): string {
  return join(dirname(file), OUTPUT_REGISTRY);
}

/** How an output is named in the registry (its directory is the registry's own). */
export function fileOutputKey(file: string): string {
  return `file:${basename(file)}`;
}

/** A pipeline, identified across invocations by its name and its state store. */
export interface Claimant {
  pipeline: string;
  /** The state store's path: two pipelines of the same name with their own state stores are two pipelines. */
  state: string;
  /** Appends only: the file may be shared with other pipelines that say so too. */
  shared: boolean;
}

/** A file's identity: replaced by another file, it is not the one whose length a checkpoint recorded. */
export interface FileIdentity {
  /** As text: inode numbers may pass what a double holds exactly. */
  dev: string;
  ino: string;
}

interface ClaimRow {
  pipeline: string;
  state: string;
  shared: number;
  dev: string | null;
  ino: string | null;
}

/**
 * Records that `claimant` writes the file, and refuses when another pipeline does unless both share it: a pipeline
 * cuts a file back to its own checkpoint after a crash, which would take away another pipeline's rows written since.
 * Returns the file's identity when this claimant last opened it (undefined the first time). Call it while holding the
 * file's output lease. A file that is missing or empty holds nobody's rows: earlier claims on it lapse.
 */
export function claimFile(
  db: Database.Database,
  file: { key: string; label: string; kind: string },
  claimant: Claimant,
  current: FileIdentity & { size: number },
): FileIdentity | undefined {
  db.exec(CLAIM_SQL.table);
  const claims = db.prepare(CLAIM_SQL.claims);
  const lapse = db.prepare(CLAIM_SQL.lapse);
  const upsert = db.prepare(CLAIM_SQL.upsert);

  return db
    .transaction(() => {
      if (current.size === 0) lapse.run(file.key, claimant.pipeline, claimant.state);
      const rows = claims.all(file.key) as ClaimRow[];
      const mine = rows.find((row) => row.pipeline === claimant.pipeline && row.state === claimant.state);
      const others = rows.filter((row) => row !== mine);
      if (others.length > 0 && (!claimant.shared || others.some((row) => row.shared !== 1))) {
        const other = others[0] as ClaimRow;
        throw new ValidationError(`${file.label} is written by another pipeline`, [
          {
            path: `${file.kind}.path`,
            message:
              `pipeline "${other.pipeline}" (state store ${other.state}) writes this file, and pipeline "${claimant.pipeline}" would ` +
              `cut or mix its rows. Write to another file, or set shared: true on the ${file.kind} sink of both pipelines ` +
              '(then each only appends: at least once, never cut back)',
          },
        ]);
      }
      upsert.run(file.key, claimant.pipeline, claimant.state, claimant.shared ? 1 : 0, current.dev, current.ino, new Date().toISOString());
      return mine?.dev != null && mine.ino != null ? { dev: mine.dev, ino: mine.ino } : undefined;
    })
    .immediate();
}
