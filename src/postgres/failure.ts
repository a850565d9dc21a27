import { OutputError } from '../errors/output-error.ts';
import { contactOf } from './reached.ts';
import { unreachableHint } from './unreachable.ts';

/** Failures of the connection or the server that go away by themselves: try again, then stop with exit 75. */
const TRANSIENT_CODES = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|ENOTFOUND|08\w{3}|57P0[1-3]|53300|53200|40001|40P01)$/;
const TRANSIENT_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection ended/i;

/**
 * A socket directory without the server's socket in it: the server is down or not started yet (it removes its socket
 * when it stops, also in a restart), which is ECONNREFUSED on a port. Nothing was sent.
 */
function noSocket(error: unknown): boolean {
  const { code, syscall } = (error ?? {}) as { code?: unknown; syscall?: unknown };
  return code === 'ENOENT' && syscall === 'connect';
}

/** Whether a failure is one of the connection's or the server's that may pass (a restart, a cut connection). */
export function isTransient(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if ((typeof code === 'string' && TRANSIENT_CODES.test(code)) || noSocket(error)) return true;
  return error instanceof Error && TRANSIENT_MESSAGES.test(error.message) && !(error instanceof OutputError);
}

/**
 * Turns a PostgreSQL failure into an OutputError that says what happened and what to do (its exit code follows:
 * 75 to wait out, 2 to fix); anything else as it is. `where` is the database's label, without its password; `pool`,
 * the pool the work ran on, says whether this process ever reached the database (`reached.ts`).
 */
export function explainPostgresFailure(error: unknown, where: string, pool?: object): unknown {
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
  if (/server does not support SSL connections/i.test(detail)) {
    return new OutputError(
      'permission',
      `${where}: the server does not support SSL connections, and sslmode (in the URL, or PGSSLMODE) asks for them — turn ssl on in the server, or set sslmode=disable to connect without TLS`,
      error,
    );
  }
  if (code === '3D000') return new OutputError('invalid_path', `${where}: ${detail} — create it (createdb), or point the URL at another database`, error);
  if (code === '53100') return new OutputError('full', `${where}: the server's disk is full (${detail}): committed data is intact; free some space and run the same command again to resume`, error);
  if (code === '57014') {
    return new OutputError('unavailable', `${where}: a statement ran past its time limit (${detail}): committed data is intact; run the same command again to resume`, error);
  }
  if (isTransient(error)) return unavailable(error, where, pool);
  return error;
}

/**
 * A server that cannot be reached, exit 75. Never reached by this process (a first contact: a wrong host or port, a
 * server not started), it says what to check, and nothing of committed data: this process wrote none there and cannot
 * see what is there. Reached before (a restart, an outage), it says that what was committed is intact. Work given no
 * pool (`retrying`, the statements after a store or sink is open) is taken as after a first contact: it is.
 */
function unavailable(error: Error, where: string, pool: object | undefined): OutputError {
  const contact = contactOf(pool);
  const hint = contact === undefined || contact.reached ? undefined : unreachableHint(error, contact.target);
  if (hint !== undefined) return new OutputError('unavailable', `${where} cannot be reached (${error.message}): ${hint}; then run the same command again`, error);
  return new OutputError('unavailable', `${where} cannot be reached (${error.message}): committed data is intact; run the same command again once the server is back`, error);
}

/** Failures before a statement reached the server: retrying them can never apply a write twice. */
const NOT_SENT = /^(ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|ENOTFOUND|57P03|53300)$/;
const NOT_SENT_MESSAGES = /timeout exceeded when trying to connect/i;

/** How long a run waits out a database that went away (a restart, a failover) before it stops with exit 75. */
export function retryLimitMs(env: Readonly<Record<string, string | undefined>> = process.env): number {
  const set = Number(env.WEBDATA_POSTGRES_RETRY_MS);
  return Number.isFinite(set) && set >= 0 ? set : 60_000;
}

/**
 * Runs `work` against a database, trying again with backoff while the failure is one that passes (a restart, a cut
 * connection), for at most `retryLimitMs()`; then, or at once for any other failure, it is explained as the
 * database's. `idempotent: false` (an INSERT that may have run before its answer was lost) retries only failures that
 * happened before the statement was sent. `attempt` lets a transaction check whether a lost answer was a commit.
 */
export async function retrying<T>(where: string, work: (attempt: number) => Promise<T>, options: { idempotent: boolean; limitMs?: number }): Promise<T> {
  const limit = options.limitMs ?? retryLimitMs();
  const started = performance.now();
  let delay = 100;
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (error) {
      const retriable = options.idempotent ? isTransient(error) : notSent(error);
      if (!retriable || performance.now() - started + delay > limit) throw explainPostgresFailure(error, where);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 5_000);
    }
  }
}

/** Whether a statement that failed with `error` surely never reached the server (no connection was made): safe to send again, whatever it does. */
export function notSent(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return (typeof code === 'string' && NOT_SENT.test(code)) || noSocket(error) || (error instanceof Error && NOT_SENT_MESSAGES.test(error.message));
}

/** Runs `work` against a database once, on `pool` where it may be the first contact, its failures explained as the database's. */
export async function atDatabase<T>(where: string, work: () => Promise<T>, pool?: object): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw explainPostgresFailure(error, where, pool);
  }
}
