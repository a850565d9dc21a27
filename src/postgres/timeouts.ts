/**
 * Bounded waits on everything (a hostile or stuck server must not hang a run): connecting, a statement, a
 * transaction left idle, and a reply on the socket. Milliseconds. A statement's limit can be set by
 * WEBDATA_POSTGRES_STATEMENT_TIMEOUT_MS (a busy server may need longer; a test, shorter).
 */
export function postgresTimeouts(env: Readonly<Record<string, string | undefined>> = process.env) {
  const set = Number(env.WEBDATA_POSTGRES_STATEMENT_TIMEOUT_MS);
  const statement = Number.isInteger(set) && set > 0 ? set : 60_000;
  return { connect: 10_000, statement, idleInTransaction: Math.max(statement, 60_000), query: statement + 15_000 };
}
