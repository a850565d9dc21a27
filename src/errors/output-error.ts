import { WebDataEtlError } from './web-data-etl-error.ts';

/** Why an output could not be written: each has its remedy and its exit code. */
export type OutputProblem = 'full' | 'read_only' | 'locked' | 'corrupt' | 'invalid_path' | 'unavailable' | 'permission';

/**
 * A failure of the disk, not of the API: the output or the state store is on a full disk, is read-only, is locked
 * by another process, is not a SQLite database (or a damaged one), or its path cannot be a file (a directory).
 * Committed data is intact (SQLite rolls back, a file sink is cut back to its checkpoint on the next run), and the run
 * resumes once the cause is gone. The last two are the user's input to fix, never to wait out. A database server adds
 * two: `unavailable` (unreachable, restarting, a statement past its time limit: wait it out) and `permission` (a
 * privilege the role lacks, a wrong password, TLS asked of a server without it: fix it).
 */
export class OutputError extends WebDataEtlError {
  readonly problem: OutputProblem;

  constructor(problem: OutputProblem, message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'OutputError';
    this.problem = problem;
  }
}
