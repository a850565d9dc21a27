import { OutputError } from '../errors/output-error.ts';

/** Failures of the connection or the server that go away by themselves: try again, then stop with exit 75. */
const TRANSIENT_CODES = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|08\w{3}|57P0[1-3]|53300|53200|40001|40P01)$/;
const TRANSIENT_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection ended/i;

/** Whether a failure is one of the connection's or the server's that may pass (a restart, a cut connection). */
export function isTransient(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && TRANSIENT_CODES.test(code)) return true;
  return error instanceof Error && TRANSIENT_MESSAGES.test(error.message) && !(error instanceof OutputError);
}

/**
 * Turns a PostgreSQL failure into an OutputError that says what happened and what to do (its exit code follows:
 * 75 to wait out, 2 to fix); anything else as it is. `where` is the database's label, without its password.
 */
export function explainPostgresFailure(error: unknown, where: string): unknown {
  if (error instanceof OutputError || !(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  const detail = error.message;
  if (code === '42501') {
    return new OutputError(
      'permission',
      `${where}: ${detail} — the role needs CREATE on the database (to create the schema) or USAGE and CREATE on the schema, and SELECT, INSERT, UPDATE, DELETE on its tables (see docs/postgres.md, "Privileges")`,
      error,
    );
  }
  if (code === '28P01' || code === '28000') {
    return new OutputError('permission', `${where}: ${detail} — check the user, and its password in PGPASSWORD, DATABASE_URL or ~/.pgpass`, error);
  }
  if (code === '3D000') return new OutputError('invalid_path', `${where}: ${detail} — create it (createdb), or point the URL at another database`, error);
  if (code === '53100') return new OutputError('full', `${where}: the server's disk is full (${detail}): committed data is intact; free some space and run the same command again to resume`, error);
  if (code === '57014') {
    return new OutputError('unavailable', `${where}: a statement ran past its time limit (${detail}): committed data is intact; run the same command again to resume`, error);
  }
  if (isTransient(error)) {
    return new OutputError('unavailable', `${where} cannot be reached (${detail}): committed data is intact; run the same command again once the server is back`, error);
  }
  return error;
}

/** Runs `work` against a database, its failures explained as the database's. */
export async function atDatabase<T>(where: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw explainPostgresFailure(error, where);
  }
}
